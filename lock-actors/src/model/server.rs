//! A redis-server of the model's own, for the cross-checks of the kinds' scripts against
//! their Rust mirrors: started on a free loopback port, stopped when dropped.

use redis::aio::MultiplexedConnection;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A redis-server of its own on a free loopback port, stopped on drop.
pub(super) struct Server {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Server {
    pub(super) fn start() -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let dir = std::env::temp_dir().join(format!("lock-model-mirror-{port}"));
        std::fs::create_dir_all(&dir).expect("a data directory");
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .arg("--appendonly")
            .arg("no")
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on the PATH (scripts/test installs it)");
        Server { child, port, dir }
    }

    pub(super) async fn connect(&self) -> MultiplexedConnection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        for _ in 0..200 {
            if let Ok(mut connection) = client.get_multiplexed_async_connection().await {
                let pong: redis::RedisResult<String> =
                    redis::cmd("PING").query_async(&mut connection).await;
                if pong.is_ok() {
                    return connection;
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("redis-server on port {} did not answer", self.port);
    }
}

/// Runs `call` as the library sends it (its script loaded first), on `connection`.
pub(super) async fn run_call(
    connection: &mut MultiplexedConnection,
    call: &crate::script::ScriptCall,
) -> redis::Value {
    let _: String = call
        .script()
        .prepare_invoke()
        .load_async(connection)
        .await
        .unwrap();
    call.evalsha().query_async(connection).await.unwrap()
}

impl Server {
    /// A pub/sub connection of its own, to listen on channels.
    pub(super) async fn pubsub(&self) -> redis::aio::PubSub {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap();
        // The server answers already: `connect` waited for it.
        client.get_async_pubsub().await.unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

//! The redis-server processes this program runs.

use super::*;

/// A `redis-server` on a free loopback port, without persistence, killed on drop (so also
/// when a scenario panics) and by the kernel when this process dies (PR_SET_PDEATHSIG).
pub(crate) struct RedisProcess {
    pub(crate) port: u16,
    pub(crate) dir: std::path::PathBuf,
    pub(crate) child: std::process::Child,
}

impl RedisProcess {
    pub(crate) fn start() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "lock-bench-redis-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir for redis-server");
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            match Self::spawn(port, &dir) {
                Ok(child) => return RedisProcess { port, dir, child },
                Err(e) => last_error = e,
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        panic!("could not start redis-server: {last_error}");
    }

    pub(crate) fn spawn(port: u16, dir: &std::path::Path) -> Result<std::process::Child, String> {
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(dir.join("redis.log")).map_err(|e| e.to_string())?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        let mut command = std::process::Command::new("redis-server");
        command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--loglevel", "warning"])
            .arg("--dir")
            .arg(dir)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(log_err);
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("spawn redis-server (scripts/bench installs it): {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
                return Err(format!("redis-server exited with {status}: {log}"));
            }
            if ping(port) {
                return Ok(child);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("redis-server on port {port} did not answer PING"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

pub(crate) fn ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && reply.starts_with(b"+PONG")
}

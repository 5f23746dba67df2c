//! The documentation pages as a reader sees them: every kind of the README's "which lock"
//! table has an example in the guide, and no snippet hides lines (rustdoc's `# ` lines show
//! up when a page is read on the web, so a snippet must read whole as written). The snippets
//! themselves are compiled as doc tests (`src/lib.rs`, `docs_doctests`).

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of every ```rust block of `text`, with their line numbers.
fn rust_lines(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut in_rust = false;
    for (number, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            in_rust = !in_rust && line.starts_with("```rust");
        } else if in_rust {
            lines.push((number + 1, line));
        }
    }
    lines
}

/// The pages a reader reads: the README and every page under docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![repo().join("README.md")];
    let docs = std::fs::read_dir(repo().join("docs")).expect("docs/");
    for entry in docs {
        let path = entry.expect("an entry of docs/").path();
        if path.extension().is_some_and(|ext| ext == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    pages
}

#[test]
fn no_snippet_hides_lines() {
    let mut hidden = Vec::new();
    for page in pages() {
        let text = read(&page);
        for (number, line) in rust_lines(&text) {
            if line == "#" || line.starts_with("# ") {
                hidden.push(format!("{}:{number}: {line}", page.display()));
            }
        }
    }
    assert!(
        hidden.is_empty(),
        "lines rustdoc hides (a reader on the web sees them):\n{}",
        hidden.join("\n")
    );
}

/// The call that takes a kind, from the "take it with" cell of its row: `client.spin_lock`,
/// `MultiLock::new`, ...
fn taking_call(cell: &str) -> Option<String> {
    let code = cell.split('`').nth(1)?;
    let end = code.find('(')?;
    let call = &code[..end];
    Some(call.strip_prefix("client").unwrap_or(call).to_string())
}

#[test]
fn every_kind_of_the_readme_has_a_guide_example() {
    let readme = read(&repo().join("README.md"));
    let table = readme
        .split("## Which lock should I use")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").nth(1))
        .expect("the README's \"Which lock should I use\" table");
    let guide = read(&repo().join("docs/guide.md"));
    let code: String = rust_lines(&guide)
        .into_iter()
        .map(|(_, line)| format!("{line}\n"))
        .collect();
    let mut kinds = 0;
    let mut missing = Vec::new();
    for row in table.lines().skip(2).filter(|row| row.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (kind, take) = (cells[2], cells[3]);
        let call = taking_call(take).unwrap_or_else(|| panic!("no call in the row of {kind}"));
        kinds += 1;
        if !code.contains(&format!("{call}(")) {
            missing.push(format!("{kind} ({call})"));
        }
    }
    assert_eq!(kinds, 11, "the kinds of the README's table: {table}");
    assert!(
        missing.is_empty(),
        "kinds with no example in docs/guide.md: {missing:?}"
    );
}

/// `docs/design.md`'s map matches the folders: every path it names exists (from the
/// repository, or from the runtime's `lock-actors/src/`, as its tables write them), and every
/// top-level module of the runtime is named in it.
#[test]
fn the_design_map_matches_the_folders() {
    let design = read(&repo().join("docs/design.md"));
    let src = repo().join("lock-actors/src");
    let mut missing = Vec::new();
    for quoted in design.split('`').skip(1).step_by(2) {
        // A folder (`lease/`) or a file (`lease/list.rs`), not a formula (`lease/3`).
        let last = quoted.rsplit('/').next().unwrap_or("");
        let looks_like_path = quoted.contains('/')
            && (last.is_empty() || last.contains('.'))
            && !quoted.contains(' ')
            && !quoted.contains("://")
            && quoted.chars().all(|c| c.is_ascii() && c != '<');
        if !looks_like_path {
            continue;
        }
        // `kind/{reentrant,fast}.rs` names each of its alternatives.
        let paths: Vec<String> = match (quoted.find('{'), quoted.find('}')) {
            (Some(open), Some(close)) if open < close => quoted[open + 1..close]
                .split(',')
                .map(|one| format!("{}{one}{}", &quoted[..open], &quoted[close + 1..]))
                .collect(),
            _ => vec![quoted.to_string()],
        };
        for path in paths {
            if !repo().join(&path).exists() && !src.join(&path).exists() {
                missing.push(path);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/design.md names what is not there: {missing:?}"
    );
    let mut unnamed = Vec::new();
    for entry in std::fs::read_dir(&src).expect("lock-actors/src") {
        let path = entry.expect("an entry").path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let is_module = path.is_dir() || path.extension().is_some_and(|ext| ext == "rs");
        if !is_module || stem == "lib" {
            continue;
        }
        let named = [
            format!("src/{stem}/"),
            format!("src/{stem}.rs"),
            format!("`{stem}/"),
            format!("`{stem}.rs`"),
        ]
        .iter()
        .any(|form| design.contains(form.as_str()));
        if !named {
            unnamed.push(stem);
        }
    }
    unnamed.sort();
    assert!(
        unnamed.is_empty(),
        "runtime modules docs/design.md does not name: {unnamed:?}"
    );
}

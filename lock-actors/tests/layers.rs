//! Layers point one way (DESIGN §1): reads every source file of lock-actors, builds the
//! graph of which file imports which (following `pub use` re-exports to the file that
//! defines the item), and checks that it has no circle, that no module imports a sibling
//! module that imports it back (at every level: the crate's top modules, a module's
//! submodules), that no file imports a file of a higher layer, and that no source file is
//! over the size the charter allows.
//!
//! Only `use` items and `crate::`/`super::`/`self::` paths in code count; comments,
//! doc links, `mod x;` declarations and `#[cfg(test)]` modules (inline, or in files of
//! their own) do not.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A flat `use` path and the name it binds.
type Binding = (Vec<String>, String);

/// A module path inside the crate, e.g. `["lock", "actor"]`; `[]` is the crate root.
type ModPath = Vec<String>;

/// The layers, top (0) to bottom; a file may import files of its own layer or below.
///
/// Files are matched by module path prefix, longest prefix first.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "macro support and web glue",
        &[
            "",
            "macro_support",
            "messages",
            "web",
            "inspect::page",
        ],
    ),
    (
        "handles",
        &["handle", "rwlock", "compose", "inspect"],
    ),
    // Test-only: imports whatever it checks (its imports do not count), imported by nothing.
    ("model checks", &["model"]),
    ("client: registries of actors, renewal", &["client", "lease::renewal"]),
    // The guards are what the actors hand out (an `Acquire` replies with a `LockGuard`).
    (
        "actors and their guards",
        &["lock", "semaphore", "latch", "registry", "lease::list", "reply", "wait_queue::driver"],
    ),
    (
        "node: connections, subscriptions, routing",
        &["node", "runtime"],
    ),
    (
        "keys, scripts, config, errors, the wait queue, telemetry, TLS settings, loss signals, lease controls, hold status",
        &[
            "keys",
            "kinds",
            "script",
            "config",
            "error",
            "denied",
            "redact",
            "wait_queue",
            "telemetry",
            "lease",
        ],
    ),
];

/// Modules the node layer (connections, subscriptions, routing) must never name.
const NOT_IN_NODE: &[&str] = &[
    "lock",
    "semaphore",
    "latch",
    "rwlock",
    "compose",
    "client",
    "handle",
    "renewal",
];

/// Largest source file, in lines of code (doc comments and blank lines aside).
const MAX_CODE_LINES: usize = 600;

/// Circles still left, each as the files in it. Empty: the lock guard reaches its actor
/// through `GuardLink` (defined in `lock::guard`, implemented by `lock::direct`'s generic
/// `Direct`), the semaphore guards through a `Recipient`, and `Grant` lives below the
/// semaphore actor. This list may only shrink: a circle that is not within one entry
/// fails, and so does an entry that no longer is a circle (remove it).
const KNOWN_CIRCLES: &[&[&str]] = &[];

/// Files still over [`MAX_CODE_LINES`]; may only shrink, as above (the wait-queue rewrite
/// split `lock/actor.rs` and `semaphore/actor.rs`: none is left).
const KNOWN_LONG: &[&str] = &[];

struct SourceFile {
    module: ModPath,
    /// The code, without comments, string contents and `#[cfg(test)]` items.
    code: String,
    lines_of_code: usize,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

fn module_of(rel: &Path) -> ModPath {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("file name");
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// Drops comments, string literals and `#[cfg(test)]` items, keeping the code.
fn strip(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            // Skip the next item: up to the matching close of its first brace, or a `;`.
            let mut depth = 0i32;
            let mut opened = false;
            for next in lines.by_ref() {
                let code = next.split("//").next().unwrap_or("");
                for ch in code.chars() {
                    match ch {
                        '{' => {
                            depth += 1;
                            opened = true;
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        let mut code = String::new();
        let mut in_str = false;
        let mut prev = ' ';
        let mut chars = line.chars().peekable();
        while let Some(ch) = chars.next() {
            if in_str {
                if ch == '"' && prev != '\\' {
                    in_str = false;
                }
                prev = if prev == '\\' && ch == '\\' { ' ' } else { ch };
                continue;
            }
            if ch == '/' && chars.peek() == Some(&'/') {
                break;
            }
            if ch == '"' {
                in_str = true;
                code.push_str("\"\"");
                prev = ch;
                continue;
            }
            code.push(ch);
            prev = ch;
        }
        out.push_str(&code);
        out.push('\n');
    }
    out
}

/// The modules a file declares as `#[cfg(test)] mod name;` (their code is in files of
/// their own).
fn test_modules(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
    while let Some(line) = lines.next() {
        if line != "#[cfg(test)]" {
            continue;
        }
        let Some(next) = lines.next() else { break };
        let declared = next
            .strip_prefix("mod ")
            .or_else(|| next.strip_prefix("pub(crate) mod "))
            .and_then(|rest| rest.strip_suffix(';'));
        if let Some(name) = declared {
            names.push(name.trim().to_string());
        }
    }
    names
}

fn lines_of_code(text: &str) -> usize {
    text.lines()
        .filter(|line| {
            let t = line.trim();
            !t.is_empty() && !t.starts_with("///") && !t.starts_with("//!")
        })
        .count()
}

/// Expands a use tree (`a::{b, c::{d as e}}`) into flat paths with the name they bind.
fn expand(tree: &str) -> Vec<(Vec<String>, String)> {
    fn split_top(list: &str) -> Vec<String> {
        let mut parts = Vec::new();
        let mut depth = 0;
        let mut current = String::new();
        for ch in list.chars() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            }
            current.push(ch);
        }
        parts.push(current);
        parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
    }
    fn walk(prefix: &[String], tree: &str, out: &mut Vec<(Vec<String>, String)>) {
        let tree: String = tree
            .chars()
            .filter(|c| !c.is_whitespace() || *c == ' ')
            .collect();
        let tree = tree.trim();
        if let Some(brace) = tree.find('{') {
            let head = tree[..brace].trim_end_matches("::");
            let mut path = prefix.to_vec();
            path.extend(
                head.split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
            let inner = &tree[brace + 1..tree.rfind('}').expect("closing brace")];
            for part in split_top(inner) {
                walk(&path, &part, out);
            }
            return;
        }
        let (path_text, alias) = match tree.split_once(" as ") {
            Some((path, alias)) => (path.trim(), Some(alias.trim().to_string())),
            None => (tree, None),
        };
        let mut path = prefix.to_vec();
        path.extend(path_text.split("::").map(|s| s.trim().to_string()));
        if path.last().map(String::as_str) == Some("self") {
            path.pop();
        }
        let name = alias.unwrap_or_else(|| path.last().cloned().unwrap_or_default());
        out.push((path, name));
    }
    let mut out = Vec::new();
    walk(&[], tree, &mut out);
    out
}

/// `use` items of a file: (is it a re-export, the flat paths).
fn use_items(code: &str) -> Vec<(bool, Vec<Binding>)> {
    let mut items = Vec::new();
    let mut rest = code;
    while let Some(at) = find_use(rest) {
        let (public, start) = at;
        let end = rest[start..].find(';').expect("use ends with ;") + start;
        items.push((public, expand(&rest[start..end])));
        rest = &rest[end + 1..];
    }
    items
}

/// Finds the next `use` keyword at the start of an item; returns (pub?, tree start).
fn find_use(code: &str) -> Option<(bool, usize)> {
    let mut offset = 0;
    for line in code.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        for (prefix, public) in [
            ("use ", false),
            ("pub use ", true),
            ("pub(crate) use ", true),
            ("pub(super) use ", true),
        ] {
            if let Some(tree) = trimmed.strip_prefix(prefix) {
                let _ = tree;
                return Some((public, offset + indent + prefix.len()));
            }
        }
        offset += line.len();
    }
    None
}

/// `crate::`/`super::`/`self::` paths written inline in code (not in `use` items).
fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let mut without_uses = String::new();
    let mut skipping = false;
    for line in code.lines() {
        let t = line.trim_start();
        if !skipping
            && (t.starts_with("use ")
                || t.starts_with("pub use ")
                || t.starts_with("pub(crate) use ")
                || t.starts_with("pub(super) use "))
        {
            skipping = true;
        }
        if skipping {
            if t.contains(';') {
                skipping = false;
            }
            continue;
        }
        without_uses.push_str(line);
        without_uses.push('\n');
    }
    let bytes = without_uses.as_bytes();
    let mut paths = Vec::new();
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(found) = without_uses[from..].find(root) {
            let start = from + found;
            from = start + root.len();
            if start > 0 {
                let before = bytes[start - 1] as char;
                if before.is_alphanumeric() || before == '_' || before == ':' || before == '$' {
                    continue;
                }
            }
            let mut end = start;
            while end < bytes.len() {
                let c = bytes[end] as char;
                if c.is_alphanumeric() || c == '_' || c == ':' {
                    end += 1;
                } else {
                    break;
                }
            }
            let path: Vec<String> = without_uses[start..end]
                .trim_end_matches(':')
                .split("::")
                .map(str::to_string)
                .collect();
            paths.push(path);
        }
    }
    paths
}

struct Crate {
    files: BTreeMap<ModPath, SourceFile>,
}

impl Crate {
    fn load() -> Crate {
        let src = src_dir();
        let mut paths = Vec::new();
        collect(&src, &mut paths);
        let sources: Vec<(ModPath, String)> = paths
            .iter()
            .map(|path| {
                let rel = path.strip_prefix(&src).expect("under src");
                let text = fs::read_to_string(path).expect("read source");
                (module_of(rel), text)
            })
            .collect();
        // The files of a module declared `#[cfg(test)] mod x;` are test code, as a
        // `#[cfg(test)]` module written inline is: their imports do not count (their
        // length does).
        let test_only: Vec<ModPath> = sources
            .iter()
            .flat_map(|(module, text)| {
                test_modules(text).into_iter().map(move |name| {
                    let mut path = module.clone();
                    path.push(name);
                    path
                })
            })
            .collect();
        let mut files = BTreeMap::new();
        for (module, text) in sources {
            let test = test_only.iter().any(|test| module.starts_with(test));
            files.insert(
                module.clone(),
                SourceFile {
                    code: if test { String::new() } else { strip(&text) },
                    module,
                    lines_of_code: lines_of_code(&text),
                },
            );
        }
        Crate { files }
    }

    /// Makes a path absolute (from the crate root), relative to module `from`.
    fn absolute(&self, from: &ModPath, path: &[String]) -> Option<Vec<String>> {
        let mut segments = path.iter().peekable();
        let mut base: Vec<String> = match segments.peek().map(|s| s.as_str()) {
            Some("crate") => {
                segments.next();
                Vec::new()
            }
            Some("super") | Some("self") => {
                let mut base = from.clone();
                while let Some(seg) = segments.peek() {
                    match seg.as_str() {
                        "super" => {
                            base.pop();
                        }
                        "self" => {}
                        _ => break,
                    }
                    segments.next();
                }
                base
            }
            Some(first) => {
                // A child module of `from` (edition 2018 paths); else an outside crate.
                let mut child = from.clone();
                child.push(first.to_string());
                if self.files.contains_key(&child) {
                    from.clone()
                } else {
                    return None;
                }
            }
            None => return None,
        };
        base.extend(segments.cloned());
        Some(base)
    }

    /// The file that defines what an absolute path names, following re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> Option<ModPath> {
        if depth > 16 {
            return None;
        }
        // The longest prefix that is a file.
        let mut split = path.len();
        while split > 0 && !self.files.contains_key(&path[..split]) {
            split -= 1;
        }
        let file = path[..split].to_vec();
        let rest = &path[split..];
        let Some(item) = rest.first() else {
            return Some(file);
        };
        if item == "*" {
            return Some(file);
        }
        // A re-export of `item` in that file?
        let source = &self.files[&file];
        for (public, uses) in use_items(&source.code) {
            if !public {
                continue;
            }
            for (target, name) in uses {
                if &name == item {
                    if let Some(abs) = self.absolute(&file, &target) {
                        let mut next = abs;
                        next.extend(rest[1..].iter().cloned());
                        return self.resolve(&next, depth + 1);
                    }
                }
            }
        }
        Some(file)
    }

    /// Edges: file → the files whose items it names (re-exports are not edges).
    fn graph(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut graph = BTreeMap::new();
        for (module, file) in &self.files {
            let mut targets = BTreeSet::new();
            let mut named: Vec<Vec<String>> = Vec::new();
            for (public, uses) in use_items(&file.code) {
                // A re-export of an own child is the parent's table of contents, not a need.
                for (path, _) in uses {
                    if public {
                        if let Some(abs) = self.absolute(module, &path) {
                            if abs.starts_with(module) {
                                continue;
                            }
                        }
                    }
                    named.push(path);
                }
            }
            named.extend(inline_paths(&file.code));
            for path in named {
                let Some(abs) = self.absolute(module, &path) else {
                    continue;
                };
                if let Some(target) = self.resolve(&abs, 0) {
                    if &target != module {
                        targets.insert(target);
                    }
                }
            }
            graph.insert(file.module.clone(), targets);
        }
        graph
    }
}

fn name(module: &ModPath) -> String {
    if module.is_empty() {
        "lib".to_string()
    } else {
        module.join("::")
    }
}

fn layer_of(module: &ModPath) -> usize {
    let name = module.join("::");
    let mut best: Option<(usize, usize)> = None;
    for (index, (_, prefixes)) in LAYERS.iter().enumerate() {
        for prefix in *prefixes {
            let matches = if prefix.is_empty() {
                name.is_empty()
            } else {
                name == *prefix || name.starts_with(&format!("{prefix}::"))
            };
            if matches && best.is_none_or(|(len, _)| prefix.len() > len) {
                best = Some((prefix.len(), index));
            }
        }
    }
    match best {
        Some((_, index)) => index,
        None => panic!("source module `{name}` has no layer in tests/layers.rs: add it"),
    }
}

/// Strongly connected components with more than one file (Tarjan).
fn circles(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a ModPath) {
        state.index.insert(node, state.next);
        state.low.insert(node, state.next);
        state.next += 1;
        state.stack.push(node);
        state.on_stack.insert(node);
        let graph = state.graph;
        for target in &graph[node] {
            if !state.index.contains_key(target) {
                visit(state, target);
                let low = state.low[target].min(state.low[node]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target) {
                let low = state.index[target].min(state.low[node]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.push(name(top));
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.found
}

fn describe(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> String {
    let mut text = String::new();
    for (from, targets) in graph {
        let names: Vec<String> = targets.iter().map(name).collect();
        text.push_str(&format!("  {} -> {}\n", name(from), names.join(", ")));
    }
    text
}

#[test]
fn no_import_circle() {
    let krate = Crate::load();
    let graph = krate.graph();
    let found = circles(&graph);
    let new: Vec<&Vec<String>> = found
        .iter()
        .filter(|circle| {
            !KNOWN_CIRCLES
                .iter()
                .any(|known| circle.iter().all(|file| known.contains(&file.as_str())))
        })
        .collect();
    assert!(
        new.is_empty(),
        "import circles in lock-actors:\n{}\ngraph:\n{}",
        new.iter()
            .map(|c| format!("  {}", c.join(" <-> ")))
            .collect::<Vec<_>>()
            .join("\n"),
        describe(&graph)
    );
    let gone: Vec<String> = KNOWN_CIRCLES
        .iter()
        .filter(|known| {
            !found
                .iter()
                .any(|circle| circle.iter().all(|file| known.contains(&file.as_str())))
        })
        .map(|known| known.join(" <-> "))
        .collect();
    assert!(
        gone.is_empty(),
        "no longer circles; remove them from KNOWN_CIRCLES: {gone:?}"
    );
}

/// The graph among the submodules of `parent`: a file under child `a` naming a file under
/// child `b` is an edge `a -> b` (files of `parent` itself are its table of contents).
fn sibling_graph(
    graph: &BTreeMap<ModPath, BTreeSet<ModPath>>,
    parent: &ModPath,
) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let child = |module: &ModPath| -> Option<ModPath> {
        (module.len() > parent.len() && module.starts_with(parent))
            .then(|| module[..=parent.len()].to_vec())
    };
    let mut siblings: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (from, targets) in graph {
        let Some(from_child) = child(from) else {
            continue;
        };
        let entry = siblings.entry(from_child.clone()).or_default();
        for target in targets {
            if let Some(target_child) = child(target) {
                if target_child != from_child {
                    entry.insert(target_child);
                }
            }
        }
    }
    for targets in siblings.clone().values() {
        for target in targets {
            siblings.entry(target.clone()).or_default();
        }
    }
    siblings
}

#[test]
fn no_import_circle_between_modules() {
    let krate = Crate::load();
    let graph = krate.graph();
    let parents: BTreeSet<ModPath> = krate
        .files
        .keys()
        .flat_map(|module| (0..module.len()).map(|len| module[..len].to_vec()))
        .collect();
    let mut found = Vec::new();
    for parent in &parents {
        let siblings = sibling_graph(&graph, parent);
        for circle in circles(&siblings) {
            found.push(format!("  in {}: {}", name(parent), circle.join(" <-> ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules importing each other:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_module_check_sees_a_circle_through_submodules() {
    let module = |path: &str| -> ModPath { path.split("::").map(str::to_string).collect() };
    let mut graph: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    // No circle between files: a::x -> b::y -> a::z; but modules a and b need each other.
    graph.insert(module("a::x"), [module("b::y")].into());
    graph.insert(module("b::y"), [module("a::z")].into());
    graph.insert(module("a::z"), BTreeSet::new());
    assert!(circles(&graph).is_empty());
    let top = sibling_graph(&graph, &Vec::new());
    assert_eq!(circles(&top), vec![vec!["a".to_string(), "b".to_string()]]);
    assert!(circles(&sibling_graph(&graph, &module("a"))).is_empty());
}

#[test]
fn lower_layers_never_import_higher_ones() {
    let krate = Crate::load();
    let mut wrong = Vec::new();
    for (from, targets) in krate.graph() {
        let layer = layer_of(&from);
        for target in targets {
            let target_layer = layer_of(&target);
            if target_layer < layer {
                wrong.push(format!(
                    "  {} ({}) imports {} ({})",
                    name(&from),
                    LAYERS[layer].0,
                    name(&target),
                    LAYERS[target_layer].0
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "upward imports:\n{}", wrong.join("\n"));
}

#[test]
fn the_node_knows_no_lock_kinds() {
    let krate = Crate::load();
    let graph = krate.graph();
    let mut wrong = Vec::new();
    for (from, targets) in &graph {
        if layer_of(from) < LAYERS.len() - 2 {
            continue;
        }
        for target in targets {
            if NOT_IN_NODE.contains(&target[0].as_str())
                || target.iter().any(|s| s == "lease_entry" || s == "renewal")
            {
                wrong.push(format!("  {} imports {}", name(from), name(target)));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the node layer names lock kinds:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_source_file_is_too_long() {
    let krate = Crate::load();
    let long: Vec<&SourceFile> = krate
        .files
        .values()
        .filter(|file| file.lines_of_code > MAX_CODE_LINES)
        .collect();
    let new: Vec<String> = long
        .iter()
        .filter(|file| !KNOWN_LONG.contains(&name(&file.module).as_str()))
        .map(|file| {
            format!(
                "  {}: {} lines of code",
                name(&file.module),
                file.lines_of_code
            )
        })
        .collect();
    assert!(
        new.is_empty(),
        "source files over {MAX_CODE_LINES} lines of code (doc comments aside):\n{}",
        new.join("\n")
    );
    let gone: Vec<&&str> = KNOWN_LONG
        .iter()
        .filter(|known| !long.iter().any(|file| name(&file.module) == **known))
        .collect();
    assert!(
        gone.is_empty(),
        "no longer too long; remove them from KNOWN_LONG: {gone:?}"
    );
}

#[test]
fn the_parser_reads_use_trees() {
    let flat = expand("super::{a::{B, C as D}, self, e::*}");
    let got: Vec<(String, String)> = flat
        .into_iter()
        .map(|(path, name)| (path.join("::"), name))
        .collect();
    assert_eq!(
        got,
        vec![
            ("super::a::B".to_string(), "B".to_string()),
            ("super::a::C".to_string(), "D".to_string()),
            ("super".to_string(), "super".to_string()),
            ("super::e::*".to_string(), "*".to_string()),
        ]
    );
}

#[test]
fn modules_declared_for_tests_are_found() {
    let text = "mod actor;\n#[cfg(test)]\nmod model;\n\n#[cfg(test)]\nmod tests {\n}\n";
    assert_eq!(test_modules(text), vec!["model".to_string()]);
}

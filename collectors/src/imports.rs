//! The house's floors, checked (tests only; ARCHITECTURE.md "Invariants"): no import circle
//! between the modules of a crate, at any level — the crate's top-level modules, or the files
//! and subfolders of one folder (a folder's `mod.rs` counts as one of its files: its children
//! put what they share in a third file, not in the parent).
//!
//! Both crates run it on their own `src/` (the agent includes this file by path). It reads
//! the source as text: a reference is a path that starts with `crate::`, `super::`, `self::`
//! or the name of a child module (`judge::judge`), inside or outside a `use`; it resolves to
//! the deepest module the path names, through the `pub use` re-exports of the module it
//! reaches (`crate::Finding` is `finding`). A module's `pub use` of its own descendants is
//! its interface, not an import; every other `use`, `pub use` included, is. Comments and
//! `#[cfg(test)]` items are left out: a test may use a module above the one it tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path from the crate root (`["load", "judge"]`; the root is `[]`).
type Module = Vec<String>;

/// Every `.rs` file below `src`, by module path.
fn modules(src: &Path) -> BTreeMap<Module, String> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<Module, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                let mut p = prefix.to_vec();
                p.push(name);
                walk(&path, &p, out);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                let mut m = prefix.to_vec();
                if !matches!(stem, "mod" | "lib" | "main") {
                    m.push(stem.to_string());
                }
                if let Ok(text) = std::fs::read_to_string(&path) {
                    out.insert(m, text);
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, &[], &mut out);
    out
}

/// The code of a file without comments and `#[cfg(test)]` items.
fn code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_start().starts_with("#[cfg(test)]") {
            // Skip the item that follows: to the `;` of a one-line item, or to the brace
            // that closes the one it opens.
            let mut depth = 0i64;
            let mut opened = false;
            let mut j = i + 1;
            while j < lines.len() {
                let l = lines[j];
                depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
                opened |= l.contains('{');
                if (opened && depth <= 0) || (!opened && l.trim_end().ends_with(';')) {
                    break;
                }
                j += 1;
            }
            i = j + 1;
            continue;
        }
        out.push(lines[i].split("//").next().unwrap_or(""));
        i += 1;
    }
    out.join("\n")
}

/// The paths a piece of code names: each as its segments, `{a, b::c}` groups expanded.
fn paths(code: &str) -> Vec<Vec<String>> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let bytes: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts =
            is_ident(bytes[i]) && (i == 0 || !(is_ident(bytes[i - 1]) || bytes[i - 1] == ':'));
        if !starts {
            i += 1;
            continue;
        }
        // Read `a::b::{...}` from here.
        let (segs, next) = path_at(&bytes, i);
        if segs.len() > 1 || segs.iter().any(|s| s.starts_with('{')) {
            out.extend(expand(&segs));
        }
        i = next.max(i + 1);
    }
    out
}

/// The segments of a path starting at `i` (a trailing `{...}` group kept whole) and where it
/// ends.
fn path_at(c: &[char], mut i: usize) -> (Vec<String>, usize) {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut segs = Vec::new();
    loop {
        if i < c.len() && c[i] == '{' {
            let mut depth = 0;
            let start = i;
            while i < c.len() {
                depth += match c[i] {
                    '{' => 1,
                    '}' => -1,
                    _ => 0,
                };
                i += 1;
                if depth == 0 {
                    break;
                }
            }
            segs.push(c[start..i].iter().collect());
            return (segs, i);
        }
        let start = i;
        while i < c.len() && is_ident(c[i]) {
            i += 1;
        }
        if start == i {
            return (segs, i);
        }
        segs.push(c[start..i].iter().collect());
        if i + 1 < c.len() && c[i] == ':' && c[i + 1] == ':' {
            i += 2;
        } else {
            return (segs, i);
        }
    }
}

/// `a::{b, c::d}` -> `a::b`, `a::c::d`.
fn expand(segs: &[String]) -> Vec<Vec<String>> {
    let Some(last) = segs.last().filter(|l| l.starts_with('{')) else {
        return vec![segs.to_vec()];
    };
    let prefix = &segs[..segs.len() - 1];
    let inner: Vec<char> = last[1..last.len() - 1].chars().collect();
    let mut items = Vec::new();
    let (mut depth, mut cur) = (0, String::new());
    for ch in inner {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            items.push(std::mem::take(&mut cur));
        } else {
            cur.push(ch);
        }
    }
    items.push(cur);
    let mut out = Vec::new();
    for item in items {
        let item = item.trim();
        // `x as y` renames the last item; inside a nested group the group handles it.
        let item = if item.contains('{') {
            item.to_string()
        } else {
            item.split(" as ").next().unwrap_or("").trim().to_string()
        };
        if item.is_empty() {
            continue;
        }
        let chars: Vec<char> = item.chars().collect();
        let (sub, _) = path_at(&chars, 0);
        for mut p in expand(&sub) {
            let mut full = prefix.to_vec();
            full.append(&mut p);
            out.push(full);
        }
    }
    out
}

struct Crate {
    modules: BTreeMap<Module, String>,
    /// Per module, names it re-exports (`pub use`) and the module each comes from.
    reexports: BTreeMap<Module, BTreeMap<String, Module>>,
}

impl Crate {
    /// The deepest module `path` names from module `cur`, following a re-export for the item
    /// after the last module when `follow`; `None` for a path outside the crate.
    fn resolve(&self, cur: &Module, path: &[String], follow: bool) -> Option<Module> {
        let (mut m, rest): (Module, &[String]) = match path.first().map(String::as_str) {
            Some("crate") => (Vec::new(), &path[1..]),
            Some("self") => (cur.clone(), &path[1..]),
            Some("super") => {
                let mut m = cur.clone();
                let mut k = 0;
                while path.get(k).map(String::as_str) == Some("super") {
                    m.pop();
                    k += 1;
                }
                (m, &path[k..])
            }
            Some(first) => {
                let mut child = cur.clone();
                child.push(first.to_string());
                if !self.modules.contains_key(&child) {
                    return None;
                }
                (cur.clone(), path)
            }
            None => return None,
        };
        for seg in rest {
            let mut next = m.clone();
            next.push(seg.clone());
            if self.modules.contains_key(&next) {
                m = next;
                continue;
            }
            if follow {
                if let Some(target) = self.reexports.get(&m).and_then(|r| r.get(seg)) {
                    return Some(target.clone());
                }
            }
            break;
        }
        Some(m)
    }
}

/// `use` declarations that are `pub` (`pub use`, `pub(crate) use`): (their text, start, end).
fn pub_uses(code: &str) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = code[from..].find("pub") {
        let start = from + i;
        let rest = &code[start + 3..];
        let after_vis = match rest.strip_prefix('(') {
            Some(r) => match r.find(')') {
                Some(j) => &r[j + 1..],
                None => break,
            },
            None => rest,
        };
        let boundary =
            start == 0 || !code[..start].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        if boundary && after_vis.trim_start().starts_with("use ") {
            let use_at = code.len() - after_vis.trim_start().len() + 4;
            if let Some(end) = code[use_at..].find(';') {
                out.push((
                    code[use_at..use_at + end].to_string(),
                    start,
                    use_at + end + 1,
                ));
                from = use_at + end + 1;
                continue;
            }
        }
        from = start + 3;
    }
    out
}

/// The modules declared in their own file under `#[cfg(test)]` (`#[cfg(test)] mod tests;`):
/// test code, left out like inline test modules.
fn test_modules(modules: &BTreeMap<Module, String>) -> Vec<Module> {
    let mut out = Vec::new();
    for (m, text) in modules {
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        while let Some(l) = lines.next() {
            if l != "#[cfg(test)]" {
                continue;
            }
            let Some(next) = lines.next() else { break };
            let decl = next
                .strip_prefix("pub(crate) ")
                .or_else(|| next.strip_prefix("pub(super) "))
                .or_else(|| next.strip_prefix("pub "))
                .unwrap_or(next);
            if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
                let mut t = m.clone();
                t.push(name.trim().to_string());
                out.push(t);
            }
        }
    }
    out
}

/// Every import circle of the crate in `src`: (the folder, the members of one circle), where
/// a member is a child file or subfolder of the folder, or `(mod)` for the folder's own file.
pub fn circles(src: &Path) -> Vec<(String, Vec<String>)> {
    let mut modules = modules(src);
    let tests = test_modules(&modules);
    modules.retain(|m, _| !tests.iter().any(|t| m.starts_with(t)));
    let codes: BTreeMap<Module, String> =
        modules.iter().map(|(m, t)| (m.clone(), code(t))).collect();
    let mut krate = Crate {
        modules: modules.clone(),
        reexports: BTreeMap::new(),
    };
    // Re-exports first, without following others (one level is what the crates use).
    let mut reexports = BTreeMap::new();
    for (m, c) in &codes {
        let mut names = BTreeMap::new();
        for (text, _, _) in pub_uses(c) {
            let chars: Vec<char> = text.trim().chars().collect();
            let (segs, _) = path_at(&chars, 0);
            for p in expand(&segs) {
                let name = text
                    .split(" as ")
                    .nth(1)
                    .filter(|_| !text.contains('{'))
                    .map(|n| n.trim().to_string())
                    .unwrap_or_else(|| p.last().cloned().unwrap_or_default());
                if let Some(target) = krate.resolve(m, &p, false) {
                    names.insert(name, target);
                }
            }
        }
        reexports.insert(m.clone(), names);
    }
    krate.reexports = reexports;
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, c) in &codes {
        let mut text = c.clone();
        // A module's `pub use` of its own descendants is its interface, not an import.
        for (decl, start, end) in pub_uses(c).into_iter().rev() {
            let chars: Vec<char> = decl.trim().chars().collect();
            let (segs, _) = path_at(&chars, 0);
            let own = expand(&segs).iter().all(|p| {
                krate
                    .resolve(m, p, false)
                    .is_some_and(|t| t.len() > m.len() && t[..m.len()] == m[..])
            });
            if own {
                text.replace_range(start..end, "");
            }
        }
        let text: String = text
            .lines()
            .filter(|l| !is_mod_decl(l))
            .collect::<Vec<_>>()
            .join("\n");
        for p in paths(&text) {
            if let Some(t) = krate.resolve(m, &p, true) {
                if &t != m {
                    edges.entry(m.clone()).or_default().insert(t);
                }
            }
        }
    }
    let folders: BTreeSet<Module> = modules
        .keys()
        .filter(|m| !m.is_empty())
        .map(|m| m[..m.len() - 1].to_vec())
        .collect();
    let mut out = Vec::new();
    for f in folders {
        // The child of `f` a module belongs to, or `f` itself.
        let member = |m: &Module| -> Option<Module> {
            if m.len() > f.len() && m[..f.len()] == f[..] {
                Some(m[..=f.len()].to_vec())
            } else if *m == f {
                Some(f.clone())
            } else {
                None
            }
        };
        let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (a, bs) in &edges {
            let Some(ma) = member(a) else { continue };
            for b in bs {
                if let Some(mb) = member(b).filter(|mb| *mb != ma) {
                    graph.entry(ma.clone()).or_default().insert(mb);
                }
            }
        }
        for circle in strongly_connected(&graph) {
            let name = |m: &Module| {
                if *m == f {
                    "(mod)".to_string()
                } else {
                    m.join("/")
                }
            };
            out.push((
                if f.is_empty() {
                    "<crate>".into()
                } else {
                    f.join("/")
                },
                circle.iter().map(name).collect(),
            ));
        }
    }
    out
}

/// `mod x;` and `pub mod x;` lines: declarations, not imports.
fn is_mod_decl(line: &str) -> bool {
    let l = line.trim();
    let l = l.strip_prefix("pub ").unwrap_or(l);
    let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
    l.starts_with("mod ") && l.ends_with(';')
}

/// The strongly connected components of more than one node (Tarjan's algorithm, iterative
/// enough for a crate's few hundred modules).
fn strongly_connected(g: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct S<'a> {
        g: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on: BTreeSet<Module>,
        next: usize,
        out: Vec<Vec<Module>>,
    }
    fn visit(s: &mut S<'_>, v: &Module) {
        s.index.insert(v.clone(), s.next);
        s.low.insert(v.clone(), s.next);
        s.next += 1;
        s.stack.push(v.clone());
        s.on.insert(v.clone());
        let succ: Vec<Module> = s.g.get(v).into_iter().flatten().cloned().collect();
        for w in succ {
            if !s.index.contains_key(&w) {
                visit(s, &w);
                let lw = s.low[&w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(&w);
                let done = w == *v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = S {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    let nodes: Vec<Module> = g.keys().cloned().collect();
    for v in nodes {
        if !s.index.contains_key(&v) {
            visit(&mut s, &v);
        }
    }
    s.out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate of files written here.
    fn fake(files: &[(&str, &str)]) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = t.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        t
    }

    #[test]
    fn finds_circles_between_modules_and_between_files_of_a_folder() {
        let t = fake(&[
            (
                "lib.rs",
                "pub mod a;\npub mod b;\npub mod c;\npub use a::Thing;\n",
            ),
            ("a.rs", "use crate::b::X;\npub struct Thing;\n"),
            // b reaches a through the crate root's re-export.
            (
                "b/mod.rs",
                "pub mod inner;\npub mod other;\npub use inner::X;\nfn f() { crate::Thing; }\n",
            ),
            ("b/inner.rs", "use super::other::Y;\npub struct X;\n"),
            (
                "b/other.rs",
                "pub struct Y;\nfn g() { super::inner::X; }\n// crate::c::Z in a comment\n",
            ),
            (
                "c.rs",
                "#[cfg(test)]\nmod tests {\n    use crate::a::Thing;\n}\npub struct Z;\n",
            ),
        ]);
        let got = circles(t.path());
        assert_eq!(
            got,
            vec![
                (
                    "<crate>".to_string(),
                    vec!["a".to_string(), "b".to_string()]
                ),
                (
                    "b".to_string(),
                    vec!["b/inner".to_string(), "b/other".to_string()]
                ),
            ]
        );
    }

    /// A test module in a file of its own (`#[cfg(test)] mod tests;`) is test code: its
    /// imports make no circle.
    #[test]
    fn a_test_module_in_its_own_file_is_left_out() {
        let t = fake(&[
            ("lib.rs", "pub mod m;\n"),
            ("m/mod.rs", "pub mod a;\npub mod b;\n"),
            ("m/a.rs", "use super::b::B;\npub struct A;\n"),
            ("m/b.rs", "pub struct B;\n#[cfg(test)]\nmod tests;\n"),
            ("m/b/tests.rs", "use crate::m::a::A;\n"),
        ]);
        assert!(circles(t.path()).is_empty());
        // The same import outside a test module is a circle.
        std::fs::write(t.path().join("m/b.rs"), "pub struct B;\nmod helpers;\n").unwrap();
        std::fs::write(t.path().join("m/b/helpers.rs"), "use crate::m::a::A;\n").unwrap();
        assert_eq!(
            circles(t.path()),
            vec![("m".to_string(), vec!["m/a".to_string(), "m/b".to_string()])]
        );
    }

    #[test]
    fn a_child_that_re_exports_a_sibling_imports_it_and_a_parent_that_uses_a_child_does_not_circle()
    {
        let t = fake(&[
            ("lib.rs", "pub mod m;\n"),
            (
                "m/mod.rs",
                "mod a;\nmod b;\npub use a::A;\nfn f() -> a::A { b::g() }\n",
            ),
            ("m/a.rs", "pub use super::b::B;\npub struct A;\n"),
            (
                "m/b.rs",
                "use super::a::A;\npub struct B;\npub fn g() -> A { A }\n",
            ),
        ]);
        assert_eq!(
            circles(t.path()),
            vec![("m".to_string(), vec!["m/a".to_string(), "m/b".to_string()])]
        );
    }

    #[test]
    fn paths_are_read_with_their_groups() {
        let p = paths(
            "use crate::{a::B, c};\nlet x = crate::d::e();\nsuper::super::f::{g, h::{i, j as k}};",
        );
        let p: Vec<String> = p.iter().map(|s| s.join("::")).collect();
        assert_eq!(
            p,
            [
                "crate::a::B",
                "crate::c",
                "crate::d::e",
                "super::super::f::g",
                "super::super::f::h::i",
                "super::super::f::h::j"
            ]
        );
    }

    /// This crate's own modules.
    #[test]
    fn no_import_circle_in_this_crate() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let found = circles(&src);
        assert!(
            found.is_empty(),
            "import circles (folder, members): {found:#?}"
        );
    }
}

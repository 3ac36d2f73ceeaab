//! No function of the product is longer than [`MAX_LINES`] lines (STYLE.md: a function reads
//! top to bottom in one screen or two; a long one becomes named phases). Test code is exempt:
//! `#[test]` functions, `#[cfg(test)]` items and modules, and the `tests/` directories.
//!
//! The source is parsed with `syn`, and modules are followed from each workspace member's
//! crate roots as rustc follows them (`mod x;`, `#[path]`), so a `#[cfg(test)] mod tests;`
//! file is known for test code by its declaration. A file under a member's `src/` that no
//! root reaches fails the test: it would otherwise go unchecked.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use syn::punctuated::Punctuated;
use syn::visit::Visit;

/// The longest function allowed, from its `fn` line to its closing brace.
const MAX_LINES: usize = 120;

/// A function over the limit.
#[derive(Debug, PartialEq, Eq)]
struct Long {
    file: String,
    line: usize,
    name: String,
    lines: usize,
}

/// True for `#[test]`, `#[tokio::test]` and the like, and a `cfg` that holds only when
/// compiling tests (`cfg(test)`, `cfg(all(test, unix))`; not `cfg(not(test))` or
/// `cfg(any(test, unix))`).
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().segments.last().is_some_and(|s| s.ident == "test")
            || (a.path().is_ident("cfg")
                && a.parse_args::<syn::Meta>()
                    .is_ok_and(|m| without_tests(&m) == Some(false)))
    })
}

/// A `cfg` predicate's value when not compiling tests: `None` when it depends on something
/// else (a feature, the target).
fn without_tests(m: &syn::Meta) -> Option<bool> {
    let syn::Meta::List(l) = m else {
        return m.path().is_ident("test").then_some(false);
    };
    let args = l
        .parse_args_with(Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
        .ok()?;
    let values: Vec<Option<bool>> = args.iter().map(without_tests).collect();
    let (all, any) = (
        values.iter().all(|v| *v == Some(true)),
        values.iter().all(|v| *v == Some(false)),
    );
    if l.path.is_ident("all") {
        if values.contains(&Some(false)) {
            Some(false)
        } else {
            all.then_some(true)
        }
    } else if l.path.is_ident("any") {
        if values.contains(&Some(true)) {
            Some(true)
        } else {
            any.then_some(false)
        }
    } else if l.path.is_ident("not") && values.len() == 1 {
        values[0].map(|v| !v)
    } else {
        None
    }
}

/// `#[path = "…"]` of a module declaration.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Walks one file's items: measures its functions, and collects its out-of-line module
/// declarations (`mod x;`) with the file each names, split into product and test modules.
struct FileWalk<'a> {
    file: &'a str,
    /// Where `mod x;` looks for `x.rs` / `x/mod.rs` (the inline modules around it included).
    children: PathBuf,
    /// Where `#[path]` of a module declared outside inline modules is relative to.
    here: PathBuf,
    inline_depth: usize,
    long: Vec<Long>,
    modules: Vec<PathBuf>,
    test_modules: Vec<PathBuf>,
}

impl FileWalk<'_> {
    fn measure(&mut self, name: &syn::Ident, from: proc_macro2::Span, to: proc_macro2::Span) {
        let (first, last) = (from.start().line, to.end().line);
        let lines = last + 1 - first;
        if lines > MAX_LINES {
            self.long.push(Long {
                file: self.file.to_string(),
                line: first,
                name: name.to_string(),
                lines,
            });
        }
    }

    fn declared(&self, m: &syn::ItemMod) -> PathBuf {
        match path_attr(&m.attrs) {
            Some(p) if self.inline_depth == 0 => self.here.join(p),
            Some(p) => self.children.join(p),
            None => {
                let flat = self.children.join(format!("{}.rs", m.ident));
                if flat.is_file() {
                    flat
                } else {
                    self.children.join(m.ident.to_string()).join("mod.rs")
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for FileWalk<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if is_test(&f.attrs) {
            return;
        }
        self.measure(
            &f.sig.ident,
            f.sig.fn_token.span,
            f.block.brace_token.span.close(),
        );
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test(&f.attrs) {
            return;
        }
        self.measure(
            &f.sig.ident,
            f.sig.fn_token.span,
            f.block.brace_token.span.close(),
        );
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if is_test(&f.attrs) {
            return;
        }
        if let Some(b) = &f.default {
            self.measure(
                &f.sig.ident,
                f.sig.fn_token.span,
                b.brace_token.span.close(),
            );
        }
        syn::visit::visit_trait_item_fn(self, f);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if !is_test(&i.attrs) {
            syn::visit::visit_item_impl(self, i);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let test = is_test(&m.attrs);
        match &m.content {
            None => {
                let file = self.declared(m);
                if test {
                    self.test_modules.push(file);
                } else {
                    self.modules.push(file);
                }
            }
            Some(_) if test => {}
            Some(_) => {
                let outer = self.children.clone();
                self.children = outer.join(m.ident.to_string());
                self.inline_depth += 1;
                syn::visit::visit_item_mod(self, m);
                self.inline_depth -= 1;
                self.children = outer;
            }
        }
    }
}

/// The functions over the limit in one file's text, and the module files it declares
/// (product, test). `path` is the file's path, `shown` its name in the report; `mod_rs` tells
/// whether it is a crate root or a `mod.rs` (whose submodules live beside it rather than in a
/// directory of its name).
fn walk_file(
    path: &Path,
    shown: &str,
    text: &str,
    mod_rs: bool,
) -> (Vec<Long>, Vec<PathBuf>, Vec<PathBuf>) {
    let syntax = syn::parse_file(text)
        .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), e.span().start().line));
    let here = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let children = if mod_rs {
        here.clone()
    } else {
        here.join(path.file_stem().unwrap_or_default())
    };
    let mut w = FileWalk {
        file: shown,
        children,
        here,
        inline_depth: 0,
        long: Vec::new(),
        modules: Vec::new(),
        test_modules: Vec::new(),
    };
    w.visit_file(&syntax);
    (w.long, w.modules, w.test_modules)
}

/// The workspace's members (`[workspace] members` of the root Cargo.toml).
fn members(root: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let doc: toml::Table = toml::from_str(&text).expect("Cargo.toml parses");
    doc["workspace"]["members"]
        .as_array()
        .expect("workspace.members")
        .iter()
        .map(|m| root.join(m.as_str().expect("a member is a path")))
        .collect()
}

/// A member's crate roots: its library, binaries, build script and benches (not `tests/`).
fn crate_roots(member: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["src/lib.rs", "src/main.rs", "build.rs"]
        .iter()
        .map(|r| member.join(r))
        .filter(|p| p.is_file())
        .collect();
    for dir in ["src/bin", "benches"] {
        if let Ok(rd) = std::fs::read_dir(member.join(dir)) {
            let mut more: Vec<PathBuf> = rd
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "rs"))
                .collect();
            more.sort();
            roots.extend(more);
        }
    }
    roots
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut BTreeSet<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.filter_map(Result::ok) {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.insert(p);
        }
    }
}

fn normal(p: &Path) -> PathBuf {
    p.canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn no_function_of_the_product_is_longer_than_120_lines() {
    let root = normal(&Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    let mut long = Vec::new();
    let mut product = BTreeSet::new();
    let mut test_files = BTreeSet::new();
    for member in members(&root) {
        let mut todo: Vec<(PathBuf, bool)> = crate_roots(&member)
            .into_iter()
            .map(|r| (r, true))
            .collect();
        assert!(!todo.is_empty(), "{}: no crate root", member.display());
        while let Some((file, mod_rs)) = todo.pop() {
            let file = normal(&file);
            if !product.insert(file.clone()) {
                continue;
            }
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let shown = file
                .strip_prefix(&root)
                .unwrap_or(&file)
                .display()
                .to_string();
            let (l, modules, tests) = walk_file(&file, &shown, &text, mod_rs);
            long.extend(l);
            for m in modules {
                let mod_rs = m.file_name().is_some_and(|n| n == "mod.rs");
                todo.push((m, mod_rs));
            }
            test_files.extend(tests.iter().map(|m| normal(m)));
        }
    }
    assert!(product.len() > 100, "only {} files reached", product.len());
    // Every file under a member's src/ is product code reached from a root, or a test module.
    let mut unreached = Vec::new();
    for member in members(&root) {
        let mut all = BTreeSet::new();
        rust_files(&member.join("src"), &mut all);
        for f in all {
            let f = normal(&f);
            if !product.contains(&f) && !test_files.contains(&f) {
                unreached.push(f.display().to_string());
            }
        }
    }
    assert!(
        unreached.is_empty(),
        "files no crate root reaches (so not checked): {unreached:#?}"
    );
    long.sort_by_key(|l| std::cmp::Reverse(l.lines));
    let report: Vec<String> = long
        .iter()
        .map(|l| format!("{}:{} fn {}: {} lines", l.file, l.line, l.name, l.lines))
        .collect();
    assert!(
        long.is_empty(),
        "{} function(s) over {MAX_LINES} lines: split each into named phases\n{}",
        long.len(),
        report.join("\n")
    );
}

/// The measure itself: a function of 121 lines is caught, one of 120 is not, in any item
/// that holds functions; test code is left alone; modules are found where rustc looks.
#[test]
fn the_length_check_measures_what_it_should() {
    let body = |n: usize| "    let _ = 0;\n".repeat(n - 2);
    let text = format!(
        "fn at_limit() {{\n{}}}\n\
         pub fn over() {{\n{}}}\n\
         struct S;\n\
         impl S {{\n    fn method() {{\n{}    }}\n}}\n\
         trait T {{\n    fn provided() {{\n{}    }}\n}}\n\
         mod inline {{\n    fn nested_outer() {{\n        fn inner() {{\n{}        }}\n    }}\n    mod deeper;\n}}\n\
         #[test]\nfn a_test() {{\n{}}}\n\
         #[cfg(test)]\nmod tests {{\n    fn helper() {{\n{}    }}\n}}\n\
         #[cfg(all(test, unix))]\nimpl S {{\n    fn test_only() {{\n{}    }}\n}}\n\
         #[cfg(not(test))]\nfn not_in_tests() {{\n{}}}\n\
         #[cfg(any(test, unix))]\nfn maybe_in_tests() {{\n{}}}\n\
         mod plain;\n#[path = \"../elsewhere.rs\"]\nmod moved;\n#[cfg(test)]\nmod tests_file;\n",
        body(120),
        body(121),
        body(125),
        body(130),
        body(200),
        body(300),
        body(300),
        body(300),
        body(131),
        body(132),
    );
    let (long, modules, tests) = walk_file(Path::new("src/a.rs"), "src/a.rs", &text, false);
    let got: Vec<(&str, usize)> = long.iter().map(|l| (l.name.as_str(), l.lines)).collect();
    assert_eq!(
        got,
        vec![
            ("over", 121),
            ("method", 125),
            ("provided", 130),
            // The outer function holds the inner one's lines, so both are over.
            ("nested_outer", 202),
            ("inner", 200),
            ("not_in_tests", 131),
            ("maybe_in_tests", 132),
        ]
    );
    assert_eq!(long[0].line, 121, "{:?}", long[0]);
    assert_eq!(
        modules,
        vec![
            PathBuf::from("src/a/inline/deeper/mod.rs"),
            PathBuf::from("src/a/plain/mod.rs"),
            PathBuf::from("src/../elsewhere.rs"),
        ]
    );
    assert_eq!(tests, vec![PathBuf::from("src/a/tests_file/mod.rs")]);
    // A crate root or mod.rs keeps its submodules beside it.
    let (_, modules, _) = walk_file(Path::new("src/lib.rs"), "src/lib.rs", "mod x;", true);
    assert_eq!(modules, vec![PathBuf::from("src/x/mod.rs")]);
}

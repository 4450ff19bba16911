//! The dependency rule of ARCHITECTURE.md, checked on the source: arrows
//! point one way (cli → sources/report → builder → sampler/dataset → layouts →
//! cache/lance → features → video → value → storage/dtype/util/error), no module
//! imports another that imports it back, and no layout's `read.rs` or
//! `format.rs` imports a writer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layer of a top-level module: imports go to the same or a lower layer.
fn layer(top: &str) -> Option<u32> {
    Some(match top {
        "error" | "util" | "dtype" | "storage" => 0,
        "value" | "download" => 1,
        "video" => 2,
        "features" => 3,
        "cache" | "lance" => 4,
        "layouts" => 5,
        "dataset" => 6,
        "sampler" => 7,
        "builder" => 8,
        "pipeline" => 8,
        "mixture" => 8,
        "sources" => 9,
        "report" => 9,
        _ => return None,
    })
}

/// Writer-side modules of the layouts, which no reader may import.
fn is_writer_side(module: &str) -> bool {
    module.starts_with("layouts::")
        && ["write", "resume", "manifest"]
            .iter()
            .any(|w| module.ends_with(&format!("::{w}")) || module.contains(&format!("::{w}::")))
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/a/b.rs` → `a::b`, `src/a/mod.rs` → `a`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// The source a module compiles outside its tests, comments removed.
fn code(text: &str) -> String {
    let body = text.split("#[cfg(test)]\nmod tests").next().unwrap();
    body.lines()
        .map(|l| l.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a module names through `crate::` or `super::`, with one level
/// of `{a, b::c}` groups expanded, as absolute segment lists.
fn paths_named(module: &str, code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let parent: Vec<&str> = {
        let mut p: Vec<&str> = module.split("::").collect();
        p.pop();
        p
    };
    for (root, base) in [("crate::", Vec::new()), ("super::", parent.clone())] {
        let mut rest = code;
        while let Some(i) = rest.find(root) {
            let before = rest[..i].chars().last();
            rest = &rest[i + root.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let mut head = &rest[..end];
            let mut base = base.clone();
            // `super::super::x`: one module up per `super`.
            while let Some(h) = head.strip_prefix("super::") {
                head = h;
                base.pop();
            }
            let prefix: Vec<String> = base
                .iter()
                .map(|s| s.to_string())
                .chain(
                    head.split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_string),
                )
                .collect();
            let whole = rest;
            rest = &rest[end..];
            if whole[end..].starts_with('{') {
                let close = whole.find('}').unwrap_or(whole.len());
                for item in whole[end + 1..close].split(',') {
                    let mut p = prefix.clone();
                    p.extend(
                        item.trim()
                            .split("::")
                            .filter(|s| !s.is_empty())
                            .map(str::to_string),
                    );
                    out.push(p);
                }
            } else {
                out.push(prefix);
            }
        }
    }
    out
}

/// The import graph of `src/` (the library; the CLI binary may use anything).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    files.retain(|f| !f.starts_with(src.join("bin")));
    let modules: BTreeMap<String, String> = files
        .iter()
        .map(|f| {
            (
                module_of(&src, f),
                code(&std::fs::read_to_string(f).unwrap()),
            )
        })
        .collect();
    let mut g = BTreeMap::new();
    for (m, text) in &modules {
        let mut deps = BTreeSet::new();
        for path in paths_named(m, text) {
            // The longest prefix that is a module.
            let target = (1..=path.len())
                .rev()
                .map(|n| path[..n].join("::"))
                .find(|c| modules.contains_key(c));
            if let Some(t) = target {
                if &t != m && !m.starts_with(&format!("{t}::")) && t != "lib" {
                    deps.insert(t);
                }
            }
        }
        g.insert(m.clone(), deps);
    }
    g
}

#[test]
fn imports_point_down_the_layers() {
    let g = graph();
    let mut wrong = Vec::new();
    for (m, deps) in &g {
        let top = m.split("::").next().unwrap();
        let Some(from) = layer(top) else {
            assert_eq!(m, "lib", "module {m} has no layer in this test");
            continue;
        };
        for d in deps {
            let to = layer(d.split("::").next().unwrap()).unwrap();
            if to > from {
                wrong.push(format!("{m} -> {d}"));
            }
        }
    }
    assert!(wrong.is_empty(), "imports up the layers: {wrong:#?}");
    // The graph is real: the layers above do import the ones below.
    assert!(g["layouts::arrow_shards::read"].contains("layouts::arrow_shards::format"));
    assert!(g["sources::csv"].contains("builder"));
}

#[test]
fn readers_never_import_writers() {
    let g = graph();
    let mut wrong = Vec::new();
    for (m, deps) in &g {
        let reader_side = m.starts_with("layouts::")
            && (m.ends_with("::read")
                || m.contains("::read::")
                || m.ends_with("::format")
                || m.ends_with("::backend"));
        for d in deps {
            if reader_side && is_writer_side(d) {
                wrong.push(format!("{m} -> {d}"));
            }
            if m.ends_with("::format") && d.ends_with("::read") {
                wrong.push(format!("{m} -> {d}"));
            }
        }
    }
    assert!(wrong.is_empty(), "a reader imports a writer: {wrong:#?}");
    assert!(g.contains_key("layouts::video_frames::read"));
    assert!(g.contains_key("layouts::arrow_shards::read::shard"));
}

#[test]
fn no_module_imports_another_that_imports_it_back() {
    let g = graph();
    // Tarjan's strongly connected components; any of more than one module is a cycle.
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        cycles: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                t.cycles.push(comp);
            }
        }
    }
    let mut t = T {
        g: &g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        cycles: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    assert!(t.cycles.is_empty(), "import cycles: {:?}", t.cycles);
    assert!(g.len() > 40, "found only {} modules", g.len());
}

/// Rayon's global pool cannot be rebuilt in a forked child (a DataLoader
/// worker), so no library code may run parallel work outside a pool it
/// names: a file that splits work over a pool (parallel iterators, rayon's
/// `join`/`scope`/`spawn`, or jpeg-decoder, which splits a decode over the
/// calling thread's pool) also calls `in_pool(` or a pool of its own.
#[test]
fn parallel_work_never_runs_on_rayons_global_pool() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    let parallel = [
        "par_iter",
        "par_chunks",
        "par_bridge",
        "rayon::join",
        "rayon::scope",
        "rayon::spawn",
        "rayon::in_place_scope",
        "jpeg_decoder::Decoder::new",
    ];
    let pools = ["in_pool(", ".install(", "pool.spawn", "pool.scope"];
    let mut checked = 0;
    let mut wrong = Vec::new();
    for f in files {
        let c = code(&std::fs::read_to_string(&f).unwrap());
        if let Some(p) = parallel.iter().find(|p| c.contains(*p)) {
            checked += 1;
            if !pools.iter().any(|q| c.contains(q)) {
                wrong.push(format!("{} uses {p} without a pool", f.display()));
            }
        }
    }
    assert!(
        checked >= 5,
        "only {checked} files with parallel calls found"
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn the_path_reader_resolves_groups_and_super() {
    let p = paths_named(
        "layouts::lance_rows::read",
        "use crate::{cache::lock::CacheLock, error};\nuse super::write::X;\nlet a = crate::util::f();\nuse super::super::format::Y;",
    );
    let p: Vec<String> = p.iter().map(|s| s.join("::")).collect();
    assert_eq!(
        p,
        [
            "cache::lock::CacheLock",
            "error",
            "util::f",
            "layouts::lance_rows::write::X",
            "layouts::format::Y"
        ]
    );
}

/// Files a contributor can read whole: none in `src/` or `python/src/` over
/// 800 lines, and one over 600 only when it is in this short list and its
/// first doc line gives the reason written here.
const LONG_FILES: &[(&str, &str)] = &[];

#[test]
fn files_stay_short_enough_to_read_whole() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rs_files(&root.join("src"), &mut files);
    rs_files(&root.join("python/src"), &mut files);
    assert!(LONG_FILES.len() <= 4, "at most four long files");
    let mut wrong = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let lines = text.lines().count();
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        if lines > 800 {
            wrong.push(format!(
                "{rel}: {lines} lines, over 800: split it by concern"
            ));
        } else if lines > 600 {
            let first = text.lines().next().unwrap_or("");
            match LONG_FILES.iter().find(|(p, _)| *p == rel) {
                Some((_, why)) if first.starts_with("//!") && first.contains(why) => {}
                Some((_, why)) => wrong.push(format!(
                    "{rel}: {lines} lines; its first doc line must say why ({why:?})"
                )),
                None => wrong.push(format!(
                    "{rel}: {lines} lines, over 600: split it, or add it to LONG_FILES with a reason its first doc line gives"
                )),
            }
        }
    }
    assert!(files.len() > 50, "only {} files found", files.len());
    assert!(wrong.is_empty(), "{wrong:#?}");
}

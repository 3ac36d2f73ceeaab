//! The source documents by title (`collectors/catalogue/handbooks.toml`): a citation reads
//! "Tencent Cloud TKE, Node and Pod troubleshooting handbook § <section>" wherever a person
//! reads it; the file name stays the machine field (`Source::doc`).

use std::sync::OnceLock;

use serde::Deserialize;

use crate::finding::{Lang, Source, Text};

const FILE: &str = include_str!("../catalogue/handbooks.toml");

/// One source document.
#[derive(Debug, Clone, PartialEq)]
pub struct Handbook {
    /// Its file name under `shared/docs`.
    pub doc: String,
    pub vendor: Text,
    pub title: Text,
}

#[derive(Deserialize)]
struct RawText {
    en: String,
    zh: String,
}

#[derive(Deserialize)]
struct Raw {
    doc: String,
    vendor: RawText,
    title: RawText,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    handbook: Vec<Raw>,
}

/// Every source document, from the embedded file (checked by a unit test, so an empty list
/// only if that test fails).
pub fn all() -> &'static [Handbook] {
    static ALL: OnceLock<Vec<Handbook>> = OnceLock::new();
    ALL.get_or_init(|| {
        toml::from_str::<File>(FILE)
            .map(|f| {
                f.handbook
                    .into_iter()
                    .map(|h| Handbook {
                        doc: h.doc,
                        vendor: Text::new(h.vendor.en, h.vendor.zh),
                        title: Text::new(h.title.en, h.title.zh),
                    })
                    .collect()
            })
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "collectors/catalogue/handbooks.toml does not load");
                Vec::new()
            })
    })
}

/// The document whose file name is `doc`.
pub fn by_doc(doc: &str) -> Option<&'static Handbook> {
    all().iter().find(|h| h.doc == doc)
}

/// The document's name as a person reads it: "vendor, title" for a handbook, the name itself
/// for external documentation (`Linux kernel documentation`).
pub fn name(doc: &str, lang: Lang) -> String {
    match by_doc(doc) {
        Some(h) => match lang {
            Lang::En => format!("{}, {}", h.vendor.en, h.title.en),
            Lang::Zh => format!("{}《{}》", h.vendor.zh, h.title.zh),
        },
        None => doc.to_string(),
    }
}

/// A citation as a person reads it: the document's name and the section.
pub fn cite(source: &Source, lang: Lang) -> String {
    format!("{} § {}", name(source.doc, lang), source.section)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file loads, and names every document in both languages (the scenario test
    /// `citations::every_indexed_document_has_a_title` holds the list to shared/docs/INDEX.md).
    #[test]
    fn every_document_has_a_vendor_and_title_in_both_languages() {
        assert!(all().len() >= 5, "{:?}", all());
        for h in all() {
            assert!(h.doc.ends_with(".txt"), "{h:?}");
            assert!(!h.vendor.en.is_empty() && !h.vendor.zh.is_empty(), "{h:?}");
            assert!(!h.title.en.is_empty() && !h.title.zh.is_empty(), "{h:?}");
        }
    }

    #[test]
    fn a_citation_names_the_handbook_not_its_file() {
        let s = Source {
            doc: crate::finding::HANDBOOK,
            section: "节点磁盘爆满排障处理",
            url: None,
        };
        assert_eq!(
            cite(&s, Lang::En),
            "Tencent Cloud TKE, Node and Pod troubleshooting handbook § 节点磁盘爆满排障处理"
        );
        assert_eq!(
            cite(&s, Lang::Zh),
            "腾讯云 TKE《节点与 Pod 排障手册》 § 节点磁盘爆满排障处理"
        );
        let k = Source {
            doc: "Linux kernel documentation",
            section: "Documentation/admin-guide/sysctl/kernel.rst",
            url: Some("https://docs.kernel.org/admin-guide/sysctl/kernel.html"),
        };
        assert_eq!(
            cite(&k, Lang::En),
            "Linux kernel documentation § Documentation/admin-guide/sysctl/kernel.rst"
        );
    }
}

//! Reading the cluster: every Node in pages (`limit` + `continue`, the first page with
//! `resourceVersion=0` so the API server answers from its cache), and node-doctor's recent
//! Events about Nodes. Each answer is parsed as it arrives, on a blocking thread fed by the
//! body's chunks, into the few facts the report needs ([`NodeRow`]): a server that ignores
//! `limit` (the watch cache of older API servers does for `resourceVersion=0`) and answers
//! 5,000 Nodes at once costs the same memory as one that pages.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::marker::PhantomData;
use std::sync::Arc;

use http_body_util::BodyExt;
use hyper::body::Bytes;
use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::classes::{Classes, Dim, INSTANCE_TYPE_LABELS, POOL_LABELS, ZONE_LABELS};
use crate::kube::client::{ApiError, KubeApi};

/// Longest condition or event message kept (a message is one line of a report).
const MESSAGE_BYTES: usize = 512;
/// More pages than this is a server that never stops answering `continue`.
const MAX_PAGES: u32 = 10_000;

/// A problem a node holds: one condition of a class in its problem status.
#[derive(Debug, Clone)]
pub struct Problem {
    pub class: usize,
    pub status: Box<str>,
    pub reason: Box<str>,
    pub message: Box<str>,
    /// `lastTransitionTime`, Unix seconds.
    pub since: Option<i64>,
}

/// What the report keeps of one Node.
#[derive(Debug, Clone)]
pub struct NodeRow {
    pub name: Box<str>,
    /// Per [`Dim::ALL`]: the interned value, when the node has one.
    pub dims: [Option<u32>; 7],
    pub problems: Vec<Problem>,
}

/// A recent Warning Event of node-doctor's about a node, counted toward a class.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub node: Box<str>,
    pub class: usize,
    pub reason: Box<str>,
    pub message: Box<str>,
    pub count: u64,
    pub last: Option<i64>,
}

/// Everything read.
#[derive(Default)]
pub struct Fleet {
    pub nodes: Vec<NodeRow>,
    /// Per dimension, the values seen (a node's `dims` index into them).
    pub values: [Vec<String>; 7],
    /// The label key each node pool value came from.
    pub pool_keys: Vec<&'static str>,
    index: [HashMap<String, u32>; 7],
    pub events: Vec<EventRow>,
    pub requests: Requests,
}

/// Requests made, per list.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Requests {
    pub nodes: u32,
    pub events: u32,
}

impl Fleet {
    fn intern(&mut self, d: usize, v: String) -> u32 {
        if let Some(i) = self.index[d].get(&v) {
            return *i;
        }
        let i = self.values[d].len() as u32;
        self.index[d].insert(v.clone(), i);
        self.values[d].push(v);
        i
    }

    fn add_node(&mut self, raw: RawNode, classes: &Classes) {
        let labels = raw.metadata.labels.0;
        let label = |keys: &[&'static str]| -> Option<(&'static str, String)> {
            keys.iter().find_map(|k| {
                labels
                    .iter()
                    .find(|(l, _)| l == k)
                    .map(|(_, v)| (*k, v.clone()))
            })
        };
        let info = raw.status.node_info.unwrap_or_default();
        let mut dims = [None; 7];
        for (d, dim) in Dim::ALL.iter().enumerate() {
            let v = match dim {
                Dim::Zone => label(&ZONE_LABELS).map(|x| x.1),
                Dim::InstanceType => label(&INSTANCE_TYPE_LABELS).map(|x| x.1),
                Dim::Pool => label(&POOL_LABELS).map(|(k, v)| {
                    let i = self.intern(d, v.clone()) as usize;
                    if self.pool_keys.len() <= i {
                        self.pool_keys.push(k);
                    }
                    v
                }),
                Dim::Kernel => info.kernel_version.clone(),
                Dim::OsImage => info.os_image.clone(),
                Dim::Runtime => info.container_runtime_version.clone(),
                Dim::Kubelet => info.kubelet_version.clone(),
            };
            dims[d] = v.filter(|v| !v.is_empty()).map(|v| self.intern(d, v));
        }
        let problems = raw
            .status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .filter_map(|c| {
                let status = c.status.unwrap_or_default();
                let class = classes.of_condition(c.ctype.as_deref()?, &status)?;
                Some(Problem {
                    class,
                    status: status.into(),
                    reason: c.reason.unwrap_or_default().into(),
                    message: bounded(c.message.unwrap_or_default()),
                    since: c.last_transition_time.as_deref().and_then(unix),
                })
            })
            .collect();
        self.nodes.push(NodeRow {
            name: raw.metadata.name.unwrap_or_default().into(),
            dims,
            problems,
        });
    }
}

/// The row of a recent Warning Event of a known reason about a Node, else `None`.
fn event_row(raw: RawEvent, classes: &Classes, since: i64) -> Option<EventRow> {
    let involved = raw.involved_object.unwrap_or_default();
    if involved.kind.as_deref() != Some("Node") || raw.kind_of.as_deref() != Some("Warning") {
        return None;
    }
    let reason = raw.reason.unwrap_or_default();
    let class = classes.of_event(&reason)?;
    let last = [raw.last_timestamp, raw.event_time, raw.first_timestamp]
        .into_iter()
        .flatten()
        .find_map(|t| unix(&t));
    if last.is_some_and(|t| t < since) {
        return None;
    }
    Some(EventRow {
        node: involved.name.unwrap_or_default().into(),
        class,
        reason: reason.into(),
        message: bounded(raw.message.unwrap_or_default()),
        count: raw.count.unwrap_or(1).max(1),
        last,
    })
}

fn bounded(s: String) -> Box<str> {
    collectors::bounded::truncate(s, MESSAGE_BYTES).into_boxed_str()
}

fn unix(t: &str) -> Option<i64> {
    time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp())
}

#[derive(Deserialize, Default)]
struct RawNode {
    #[serde(default)]
    metadata: RawMeta,
    #[serde(default)]
    status: RawStatus,
}

#[derive(Deserialize, Default)]
struct RawMeta {
    name: Option<String>,
    #[serde(default)]
    labels: KeptLabels,
}

/// The labels the report groups by; the others are skipped as they are read.
#[derive(Default)]
struct KeptLabels(Vec<(String, String)>);

fn kept(key: &str) -> bool {
    ZONE_LABELS.contains(&key) || INSTANCE_TYPE_LABELS.contains(&key) || POOL_LABELS.contains(&key)
}

impl<'de> Deserialize<'de> for KeptLabels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeptLabels;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of labels")
            }
            fn visit_unit<E>(self) -> Result<KeptLabels, E> {
                Ok(KeptLabels::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeptLabels, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = map.next_key::<String>()? {
                    if kept(&k) {
                        out.push((k, map.next_value::<String>()?));
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(KeptLabels(out))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize, Default)]
struct RawStatus {
    conditions: Option<Vec<RawCondition>>,
    #[serde(rename = "nodeInfo")]
    node_info: Option<RawInfo>,
}

#[derive(Deserialize)]
struct RawCondition {
    #[serde(rename = "type")]
    ctype: Option<String>,
    status: Option<String>,
    reason: Option<String>,
    message: Option<String>,
    #[serde(rename = "lastTransitionTime")]
    last_transition_time: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawInfo {
    kernel_version: Option<String>,
    os_image: Option<String>,
    container_runtime_version: Option<String>,
    kubelet_version: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEvent {
    involved_object: Option<RawInvolved>,
    reason: Option<String>,
    message: Option<String>,
    #[serde(rename = "type")]
    kind_of: Option<String>,
    count: Option<u64>,
    last_timestamp: Option<String>,
    event_time: Option<String>,
    first_timestamp: Option<String>,
}

#[derive(Deserialize, Default)]
struct RawInvolved {
    kind: Option<String>,
    name: Option<String>,
}

/// A list's `metadata`.
#[derive(Deserialize, Default, Debug)]
pub struct ListMeta {
    #[serde(rename = "continue")]
    pub cont: Option<String>,
}

/// Parses one list document from `r`, handing each item to `each` as it is read; returns
/// the list's metadata.
pub fn parse_list<T: DeserializeOwned, R: Read>(
    r: R,
    each: &mut dyn FnMut(T),
) -> Result<ListMeta, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(r));
    let meta = ListSeed {
        each,
        item: PhantomData,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(meta)
}

struct ListSeed<'a, T> {
    each: &'a mut dyn FnMut(T),
    item: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for ListSeed<'_, T> {
    type Value = ListMeta;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<ListMeta, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for ListSeed<'_, T> {
    type Value = ListMeta;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes list")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ListMeta, A::Error> {
        let mut meta = ListMeta::default();
        while let Some(k) = map.next_key::<String>()? {
            match k.as_str() {
                "metadata" => meta = map.next_value()?,
                "items" => map.next_value_seed(Items {
                    each: &mut *self.each,
                    item: PhantomData,
                })?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(meta)
    }
}

struct Items<'a, T> {
    each: &'a mut dyn FnMut(T),
    item: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for Items<'_, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for Items<'_, T> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of items")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<T>()? {
            (self.each)(item);
        }
        Ok(())
    }
}

/// The body's chunks as a `Read`, for the parser's thread.
struct Chunks {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    cur: Bytes,
}

impl Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                Some(b) => self.cur = b,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len());
        buf[..n].copy_from_slice(&self.cur[..n]);
        self.cur = self.cur.slice(n..);
        Ok(n)
    }
}

/// One list request: the body streamed into `parse_list` on a blocking thread that owns
/// `acc` and gives it back with the list's metadata.
async fn page<T, A>(
    api: &KubeApi,
    path: &str,
    acc: A,
    each: fn(&mut A, T),
) -> Result<(A, ListMeta), ApiError>
where
    T: DeserializeOwned + 'static,
    A: Send + 'static,
{
    let mut body = api.get_streaming(path).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let parser = tokio::task::spawn_blocking(move || {
        let mut acc = acc;
        let reader = Chunks {
            rx,
            cur: Bytes::new(),
        };
        let meta = parse_list::<T, _>(reader, &mut |item| each(&mut acc, item));
        (acc, meta)
    });
    let mut transport = None;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => {
                if let Ok(data) = f.into_data() {
                    if tx.send(data).await.is_err() {
                        break;
                    }
                }
            }
            Err(e) => {
                transport = Some(ApiError::Transport(format!("reading the list: {e}")));
                break;
            }
        }
    }
    drop(tx);
    let (acc, meta) = parser
        .await
        .map_err(|e| ApiError::Transport(format!("the list's parser: {e}")))?;
    if let Some(e) = transport {
        return Err(e);
    }
    let meta = meta.map_err(|e| ApiError::Transport(format!("the list is not JSON: {e}")))?;
    Ok((acc, meta))
}

/// A query value, percent-encoded (the API server's and Prometheus's queries).
pub(super) fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Pages through `collection` (`/api/v1/nodes?…`): the first request with
/// `resourceVersion=0`, the next ones with the `continue` of the last answer; returns the
/// accumulator and the number of requests.
async fn list_all<T, A>(
    api: &KubeApi,
    collection: &str,
    limit: usize,
    mut acc: A,
    each: fn(&mut A, T),
) -> Result<(A, u32), ApiError>
where
    T: DeserializeOwned + 'static,
    A: Send + 'static,
{
    let sep = if collection.contains('?') { '&' } else { '?' };
    let mut path = format!("{collection}{sep}limit={limit}&resourceVersion=0");
    let mut requests = 0u32;
    loop {
        let (a, meta) = page(api, &path, acc, each).await?;
        acc = a;
        requests += 1;
        match meta.cont.filter(|c| !c.is_empty()) {
            Some(c) if requests < MAX_PAGES => {
                path = format!("{collection}{sep}limit={limit}&continue={}", encode(&c));
            }
            Some(_) => {
                return Err(ApiError::Transport(format!(
                    "{collection}: still a `continue` after {MAX_PAGES} pages"
                )))
            }
            None => return Ok((acc, requests)),
        }
    }
}

type Acc = (Fleet, Arc<Classes>, i64);

/// Every Node, `limit` a page.
pub async fn nodes(api: &KubeApi, classes: Arc<Classes>, limit: usize) -> Result<Fleet, ApiError> {
    let acc: Acc = (Fleet::default(), classes, 0);
    let ((mut fleet, _, _), n) = list_all(api, "/api/v1/nodes", limit, acc, |a: &mut Acc, raw| {
        a.0.add_node(raw, &a.1)
    })
    .await?;
    fleet.requests.nodes = n;
    Ok(fleet)
}

/// node-doctor's Warning Events about Nodes newer than `since` (Unix seconds), in namespace
/// `default` where they are written, selected by the server (`involvedObject.kind=Node`,
/// `source=node-doctor`); and the number of requests.
pub async fn events(
    api: &KubeApi,
    classes: Arc<Classes>,
    limit: usize,
    since: i64,
) -> Result<(Vec<EventRow>, u32), ApiError> {
    let collection = format!(
        "/api/v1/namespaces/{}/events?fieldSelector={}",
        crate::kube::planner::EVENT_NAMESPACE,
        encode("involvedObject.kind=Node,source=node-doctor")
    );
    type Events = (Vec<EventRow>, Arc<Classes>, i64);
    let acc: Events = (Vec::new(), classes, since);
    let ((rows, _, _), n) = list_all(api, &collection, limit, acc, |a: &mut Events, raw| {
        a.0.extend(event_row(raw, &a.1, a.2))
    })
    .await?;
    Ok((rows, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_read_item_by_item_keeping_only_the_reports_facts() {
        let doc = r#"{"kind":"NodeList","apiVersion":"v1","metadata":{"continue":"abc","remainingItemCount":3},
          "items":[{"metadata":{"name":"n1","labels":{"topology.kubernetes.io/zone":"z1","karpenter.sh/nodepool":"general","x":"y"},"annotations":{"a":"b"}},
                    "status":{"images":[{"names":["a"],"sizeBytes":1}],"nodeInfo":{"kernelVersion":"6.1.0","osImage":"Debian","containerRuntimeVersion":"containerd://1.7","kubeletVersion":"v1.31.0"},
                      "conditions":[{"type":"Ready","status":"True"},{"type":"NodeDoctorDNSUnhealthy","status":"True","reason":"DNSNoAnswer","message":"dns.no_answer: no answer","lastTransitionTime":"2026-11-29T07:00:00Z"},{"type":"KernelReady","status":"False","reason":"x","message":null}]}},
                   {"metadata":{"name":"n2","labels":null},"status":{}}]}"#;
        let classes = Arc::new(Classes::builtin().unwrap());
        let mut fleet = Fleet::default();
        let meta =
            parse_list::<RawNode, _>(doc.as_bytes(), &mut |raw| fleet.add_node(raw, &classes))
                .unwrap();
        assert_eq!(meta.cont.as_deref(), Some("abc"));
        assert_eq!(fleet.nodes.len(), 2);
        let n1 = &fleet.nodes[0];
        assert_eq!(&*n1.name, "n1");
        let value =
            |d: Dim| n1.dims[d as usize].map(|i| fleet.values[d as usize][i as usize].as_str());
        assert_eq!(value(Dim::Zone), Some("z1"));
        assert_eq!(value(Dim::Pool), Some("general"));
        assert_eq!(fleet.pool_keys, vec!["karpenter.sh/nodepool"]);
        assert_eq!(value(Dim::Kernel), Some("6.1.0"));
        assert_eq!(value(Dim::InstanceType), None);
        // Ready True is health; the DNS and the NMA's kernel condition are problems.
        assert_eq!(n1.problems.len(), 2);
        assert_eq!(&*n1.problems[0].reason, "DNSNoAnswer");
        assert_eq!(n1.problems[0].since, Some(1_795_935_600));
        assert!(fleet.nodes[1].problems.is_empty());
        assert_eq!(fleet.nodes[1].dims, [None; 7]);
    }

    #[test]
    fn a_broken_list_is_an_error_not_a_short_report() {
        let mut n = 0;
        let r = parse_list::<RawNode, _>(
            r#"{"items":[{"metadata":{"name":"n1"}},"#.as_bytes(),
            &mut |_| n += 1,
        );
        assert!(r.is_err());
    }

    #[test]
    fn events_count_only_recent_warnings_about_nodes_of_known_reasons() {
        let classes = Classes::builtin().unwrap();
        let mut rows = Vec::new();
        let doc = r#"{"items":[
          {"involvedObject":{"kind":"Node","name":"n1"},"reason":"NodeDoctorUnregisterNetDevice","type":"Warning","count":4,"lastTimestamp":"2026-11-29T07:00:00Z","message":"m"},
          {"involvedObject":{"kind":"Node","name":"n1"},"reason":"NodeDoctorUnregisterNetDevice","type":"Warning","lastTimestamp":"2020-01-01T00:00:00Z"},
          {"involvedObject":{"kind":"Node","name":"n1"},"reason":"FilesystemHasSpace","type":"Normal"},
          {"involvedObject":{"kind":"Pod","name":"p"},"reason":"NodeDoctorOOMKill","type":"Warning"},
          {"involvedObject":{"kind":"Node","name":"n2"},"reason":"SomethingElse","type":"Warning"}]}"#;
        parse_list::<RawEvent, _>(doc.as_bytes(), &mut |raw| {
            rows.extend(event_row(raw, &classes, 1_795_930_000))
        })
        .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].count, 4);
    }

    #[test]
    fn continue_tokens_are_encoded() {
        assert_eq!(encode("a=b,c/d+"), "a%3Db%2Cc%2Fd%2B");
    }
}

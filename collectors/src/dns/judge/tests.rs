use std::net::SocketAddr;
use std::time::Duration;

use super::*;
use crate::dns::probe::{Answer, Attempt, Query, ServerReply};
use crate::dns::sample::{RaceCounters, Round, Window};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn answered(latency: u64, rcode: u8) -> Attempt {
    Attempt::Answered(Answer {
        latency: ms(latency),
        rcode,
        records: u16::from(rcode == 0),
        truncated: false,
    })
}

fn lost() -> Attempt {
    Attempt::NoAnswer { after: ms(2000) }
}

fn reply(a: Query, aaaa: Query, tcp: Option<Attempt>) -> ServerReply {
    ServerReply {
        server: "10.96.0.10:53".parse().unwrap(),
        a,
        aaaa,
        tcp,
        failed: None,
    }
}

fn q(first: Attempt, retry: Option<Attempt>) -> Query {
    Query { first, retry }
}

fn sample_of(rounds: &[Round], races: Option<RaceCounters>) -> DnsSample {
    let addr: SocketAddr = "10.96.0.10:53".parse().unwrap();
    DnsSample {
        name: "kubernetes.default.svc.cluster.local".into(),
        domain_source: DomainSource::Kubelet,
        try_timeout: ms(2000),
        servers: vec![Server {
            addr,
            role: Role::ClusterDns,
            latest: rounds.last().cloned().unwrap(),
            window: Window::of(rounds),
        }],
        races,
    }
}

fn healthy() -> Round {
    Round::of(&reply(
        q(answered(2, 0), None),
        q(answered(3, 0), None),
        None,
    ))
}

fn ids(d: &[Draft]) -> Vec<&str> {
    d.iter().map(|d| d.id.as_str()).collect()
}

#[test]
fn a_healthy_server_is_quiet() {
    let s = sample_of(&vec![healthy(); 10], None);
    assert!(judge(&s, &Thresholds::default()).is_empty());
    let r = healthy();
    assert!(r.udp_answered && !r.retried && !r.pair_lost && r.error_rcode.is_none());
    assert_eq!(r.latency, Some(ms(3)));
}

#[test]
fn no_answer_over_udp_is_critical_and_says_whether_tcp_answered() {
    let udp_lost = reply(
        q(lost(), Some(lost())),
        q(lost(), Some(lost())),
        Some(answered(4, 0)),
    );
    let r = Round::of(&udp_lost);
    assert!(!r.udp_answered && r.answered() && !r.refused);
    let mut rounds = vec![healthy(); 8];
    rounds.push(r.clone());
    rounds.push(r);
    let d = judge(&sample_of(&rounds, None), &Thresholds::default());
    assert_eq!(ids(&d), ["dns.no_answer"]);
    assert_eq!(d[0].severity, Severity::Critical);
    assert!(d[0].is("tcp_answers") && !d[0].is("refused") && d[0].is("cluster_dns"));
    assert_eq!(d[0].subject, "10.96.0.10:53");

    let refused = reply(
        q(Attempt::Refused, Some(Attempt::Refused)),
        q(Attempt::Refused, Some(Attempt::Refused)),
        Some(Attempt::Refused),
    );
    let r = Round::of(&refused);
    assert!(r.refused && !r.answered());
    let d = judge(
        &sample_of(
            &[r],
            Some(RaceCounters {
                insert_failed: 0,
                drop: 0,
            }),
        ),
        &Thresholds::default(),
    );
    assert_eq!(ids(&d), ["dns.no_answer"]);
    assert!(d[0].is("refused") && !d[0].is("tcp_answers") && !d[0].is("races"));
}

#[test]
fn a_probe_that_could_not_be_sent_is_not_a_dead_server() {
    let mut r = reply(q(lost(), None), q(lost(), None), None);
    r.failed = Some("Operation not permitted".into());
    let round = Round::of(&r);
    assert!(judge(&sample_of(&[round], None), &Thresholds::default()).is_empty());
}

#[test]
fn error_codes_name_their_cause_and_a_guessed_domain_softens_nxdomain() {
    for (rcode, cond) in [
        (2, "servfail"),
        (3, "nxdomain"),
        (5, "refused_rcode"),
        (4, "other_rcode"),
    ] {
        let r = Round::of(&reply(
            q(answered(3, rcode), None),
            q(answered(3, rcode), None),
            None,
        ));
        let mut s = sample_of(&[r], None);
        let d = judge(&s, &Thresholds::default());
        assert_eq!(ids(&d), ["dns.error"], "{rcode}");
        assert!(d[0].is(cond), "{rcode}");
        assert_eq!(d[0].severity, Severity::Critical);
        s.domain_source = DomainSource::Default;
        let d = judge(&s, &Thresholds::default());
        let want = if rcode == 3 {
            Severity::Warning
        } else {
            Severity::Critical
        };
        assert_eq!(d[0].severity, want, "{rcode}");
        assert!(d[0].is("domain_default"));
    }
}

#[test]
fn answers_on_the_second_try_in_two_probes_are_the_five_second_delay() {
    // The conntrack race's mark: the A answered at once, the AAAA lost and answered on retry.
    let race = Round::of(&reply(
        q(answered(2, 0), None),
        q(lost(), Some(answered(3, 0))),
        None,
    ));
    assert!(race.retried && race.pair_lost && race.udp_answered);
    let mut rounds = vec![healthy(); 8];
    rounds.push(race.clone());
    let t = Thresholds::default();
    assert!(
        judge(&sample_of(&rounds, None), &t).is_empty(),
        "one is noise"
    );
    rounds.push(race);
    let races = Some(RaceCounters {
        insert_failed: 2,
        drop: 2,
    });
    let d = judge(&sample_of(&rounds, races), &t);
    assert_eq!(ids(&d), ["dns.five_second_delay"]);
    assert_eq!(d[0].severity, Severity::Warning);
    assert!(d[0].is("pair_race") && d[0].is("races"));
    // Both of a pair lost together: loss, not the race.
    let both = Round::of(&reply(
        q(lost(), Some(answered(3, 0))),
        q(lost(), Some(answered(3, 0))),
        None,
    ));
    assert!(both.retried && !both.pair_lost);
    let d = judge(&sample_of(&[both.clone(), both], None), &t);
    assert_eq!(ids(&d), ["dns.five_second_delay"]);
    assert!(!d[0].is("pair_race") && !d[0].is("races"));
}

#[test]
fn a_slow_median_needs_enough_answers() {
    let slow = Round::of(&reply(
        q(answered(700, 0), None),
        q(answered(650, 0), None),
        None,
    ));
    assert_eq!(slow.latency, Some(ms(700)));
    let t = Thresholds::default();
    let mut rounds = vec![healthy(); 4];
    rounds.extend(vec![slow.clone(); 4]);
    assert!(
        judge(&sample_of(&rounds, None), &t).is_empty(),
        "median is healthy"
    );
    let d = judge(&sample_of(&vec![slow.clone(); 4], None), &t);
    assert!(d.is_empty(), "four answered probes are too few");
    let d = judge(&sample_of(&vec![slow; 6], None), &t);
    assert_eq!(ids(&d), ["dns.slow"]);
}

//! LLM faults, met by the worker's quick re-tries and attempt backoff (brain timeout 1 s; quick
//! re-tries after 200 ms and 400 ms, a longer Retry-After wins; attempts 500 ms, 1 s, 2 s apart).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::{LlmFault, eventually, rig, shape};

/// Three webhook triggers (three conversations, worked at once) meet the fault for three
/// seconds; returns, per trigger, the most and fewest answer requests during the fault and the
/// shortest gap between two requests for one trigger.
async fn calls_meet(fault: LlmFault) -> (usize, usize, Duration) {
    let mut rig = rig(false).await;
    rig.llm.set_fault(fault);
    for k in 0..3 {
        rig.webhook_trigger(&format!("conv-{k}"), &format!("[q{k:04}]"))
            .await;
    }
    let llm = rig.llm.clone();
    eventually("the brain is called", super::WAIT, || {
        llm.answer_calls() > 0
    })
    .await;
    let t0 = llm.calls().iter().find(|c| !c.triage).unwrap().at;
    // The fault lasts three seconds (real time passing, not a synchronisation).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t1 = Instant::now();
    rig.llm.set_fault(LlmFault::None);
    let mut by_tag: BTreeMap<String, Vec<Instant>> = BTreeMap::new();
    for c in llm.calls() {
        if !c.triage && c.at >= t0 && c.at < t1 {
            by_tag
                .entry(c.tag.unwrap_or_default())
                .or_default()
                .push(c.at);
        }
    }
    assert_eq!(
        by_tag.len(),
        3,
        "every trigger reached the brain: {by_tag:?}"
    );
    let shape = shape(&by_tag);
    println!(
        "brain calls per trigger during the fault {fault:?} (most, fewest, shortest gap): {shape:?}"
    );
    rig.assert_answered_once().await;
    shape
}

// Without backoff a worker would call the fake (2–20 ms per answer) hundreds of times in 3 s.

#[tokio::test]
async fn llm_answering_500_is_retried_with_backoff_then_each_trigger_answered_once() {
    let (most, fewest, _) = calls_meet(LlmFault::Status(500, None)).await;
    // Calls at 0, 0.2, 0.6 | 1.1, 1.3, 1.7 | 2.7, 2.9 s at the earliest.
    assert!(
        most <= 8,
        "at most 8 calls for one trigger during 3 s of 500s, got {most}"
    );
    assert!(fewest >= 3, "quick re-tries happened, got {fewest}");
}

#[tokio::test]
async fn llm_rate_limiting_is_honoured_then_each_trigger_answered_once() {
    let (most, fewest, gap) = calls_meet(LlmFault::Status(429, Some(1))).await;
    assert!(
        gap >= Duration::from_millis(950),
        "Retry-After 1 s honoured by re-tries and attempts, shortest gap {gap:?}"
    );
    assert!(
        most <= 4,
        "at most 4 calls for one trigger in 3 s, got {most}"
    );
    assert!(fewest >= 2, "re-tried during the fault, got {fewest}");
}

#[tokio::test]
async fn llm_hanging_past_the_brain_timeout_is_given_up_and_retried_then_answered_once() {
    let (most, fewest, gap) = calls_meet(LlmFault::Hang).await;
    // Each call ends at the 1 s timeout: calls at 0, 1.2, 2.6 s at the earliest.
    assert!(
        gap >= Duration::from_millis(950),
        "a hung call lasts the brain timeout, shortest gap {gap:?}"
    );
    assert!(
        most <= 3,
        "at most 3 calls for one trigger in 3 s, got {most}"
    );
    assert!(
        fewest >= 2,
        "the hung call was given up and tried again, got {fewest}"
    );
}

#[tokio::test]
async fn llm_closing_the_connection_mid_answer_is_retried_then_each_trigger_answered_once() {
    let (most, fewest, _) = calls_meet(LlmFault::Cut).await;
    assert!(
        most <= 8,
        "at most 8 calls for one trigger during 3 s of cut answers, got {most}"
    );
    assert!(fewest >= 3, "quick re-tries happened, got {fewest}");
}

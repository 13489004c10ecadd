//! The fuzzing loop: replays a target's corpus, then runs generated inputs for the time budget on
//! a watched executor thread, shrinks what fails and saves it.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use super::mutate::inputs;

/// The longest one input may take (debug builds of mail parsing are slow on megabyte inputs).
const PER_INPUT_LIMIT: Duration = Duration::from_secs(20);
/// Default time budget of the mutation phase of each target.
const DEFAULT_SECS: f64 = 3.0;
/// Most shrinking steps spent on a failing input.
const MAX_SHRINK_STEPS: usize = 2_000;

/// `Ok(outcome label)` when the input was accepted or refused with a named error; `Err(what is
/// wrong)` when a contract is broken.
pub type Outcome = Result<String, String>;

pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]) -> Outcome,
    /// Tokens the mutator inserts (what the format's parser reacts to).
    pub dictionary: &'static [&'static [u8]],
}

#[derive(Debug)]
enum Finding {
    Violation(String),
    Panic(String),
    Hang,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::Violation(why) => write!(f, "contract broken: {why}"),
            Finding::Panic(why) => write!(f, "panicked: {why}"),
            Finding::Hang => write!(f, "did not finish within {PER_INPUT_LIMIT:?}"),
        }
    }
}

/// Runs the target on its own thread, one input at a time, so that a hang is seen by the caller.
struct Executor {
    inputs: mpsc::Sender<Vec<u8>>,
    results: mpsc::Receiver<Result<String, Finding>>,
    slowest: Duration,
}

impl Executor {
    fn spawn(target: &Target) -> Self {
        let (inputs, input_rx) = mpsc::channel::<Vec<u8>>();
        let (result_tx, results) = mpsc::channel();
        let run = target.run;
        std::thread::Builder::new()
            .name(format!("fuzz-{}", target.name))
            // What a tokio worker thread has: stack exhaustion must show here, not in production.
            .stack_size(2 << 20)
            .spawn(move || {
                for input in input_rx {
                    let result = match catch_unwind(AssertUnwindSafe(|| run(&input))) {
                        Ok(Ok(label)) => Ok(label),
                        Ok(Err(why)) => Err(Finding::Violation(why)),
                        Err(panic) => Err(Finding::Panic(panic_message(&*panic))),
                    };
                    if result_tx.send(result).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn the fuzz executor");
        Self {
            inputs,
            results,
            slowest: Duration::ZERO,
        }
    }

    fn check(&mut self, input: &[u8]) -> Result<String, Finding> {
        let started = Instant::now();
        self.inputs
            .send(input.to_vec())
            .map_err(|_| Finding::Panic("the executor thread is gone".into()))?;
        let result = match self.results.recv_timeout(PER_INPUT_LIMIT) {
            Ok(result) => result,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Finding::Hang),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(Finding::Panic("the executor thread died".into()))
            }
        };
        self.slowest = self.slowest.max(started.elapsed());
        result
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic".to_owned())
}

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(target)
}

fn load_corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read the corpus {}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("corpus entry").path();
            let bytes = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                bytes,
            )
        })
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the {target} corpus is too small");
    files
}

fn budget() -> Duration {
    let secs = std::env::var("CTXGATE_FUZZ_SECS")
        .ok()
        .map(|v| {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .unwrap_or_else(|| panic!("CTXGATE_FUZZ_SECS={v:?} is not a number of seconds"))
        })
        .unwrap_or(DEFAULT_SECS);
    Duration::from_secs_f64(secs)
}

fn seed() -> u64 {
    match std::env::var("CTXGATE_FUZZ_SEED") {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("CTXGATE_FUZZ_SEED={v:?} is not a u64")),
        Err(_) => rand::random(),
    }
}

/// Saves a failing input and fails the test with a readable report.
fn report(target: &Target, origin: &str, input: &[u8], finding: &Finding) -> ! {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-findings");
    let digest = hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(input)[..8]);
    let file = dir.join(format!("{}-{digest}", target.name));
    let saved = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&file, input))
        .map_or_else(
            |e| format!("(not saved: {e})"),
            |()| file.display().to_string(),
        );
    let shown: String = String::from_utf8_lossy(input).chars().take(600).collect();
    panic!(
        "fuzz target {} {finding}\n  input from: {origin}\n  saved to: {saved}\n  \
         ({} bytes) {shown:?}\n  Fix it, then add the file to tests/corpus/{}/.",
        target.name,
        input.len(),
        target.name
    );
}

pub fn fuzz(target: &Target) {
    let corpus = load_corpus(target.name);
    let mut exec = Executor::spawn(target);
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();

    // (a) Every seed, as it is.
    for (name, bytes) in &corpus {
        match exec.check(bytes) {
            Ok(label) => *outcomes.entry(label).or_default() += 1,
            Err(finding) => report(target, &format!("corpus file {name}"), bytes, &finding),
        }
    }

    // (b) Generated inputs for the time budget.
    let seed = seed();
    // Printed first: a stack overflow aborts the process before any report, and the seed
    // replays the same inputs in the same order.
    eprintln!("fuzz {}: mutation phase with seed {seed}", target.name);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let seeds: Arc<Vec<Vec<u8>>> = Arc::new(corpus.iter().map(|(_, b)| b.clone()).collect());
    let strategy = inputs(seeds, target.dictionary);
    let budget = budget();
    let started = Instant::now();
    let mut executions = 0u64;
    while started.elapsed() < budget {
        let mut tree = strategy
            .new_tree(&mut runner)
            .expect("the input strategy never rejects");
        let input = tree.current();
        executions += 1;
        match exec.check(&input) {
            Ok(label) => *outcomes.entry(label).or_default() += 1,
            Err(Finding::Hang) => report(
                target,
                &format!("generated (seed {seed})"),
                &input,
                &Finding::Hang,
            ),
            Err(finding) => {
                let (input, finding) = shrink(&mut exec, &mut tree, input, finding);
                report(
                    target,
                    &format!("generated and shrunk (seed {seed})"),
                    &input,
                    &finding,
                );
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    eprintln!(
        "fuzz {}: {executions} executions in {elapsed:.1} s ({:.0}/s), {} corpus files, \
         seed {seed}, slowest input {:?}; outcomes {outcomes:?}",
        target.name,
        executions as f64 / elapsed.max(1e-9),
        corpus.len(),
        exec.slowest,
    );
    assert!(
        budget.is_zero() || executions > 0,
        "no generated input ran in the budget"
    );
}

/// Proptest's own shrinking loop over the failing input's value tree (hangs are not shrunk: the
/// executor is stuck in them).
fn shrink(
    exec: &mut Executor,
    tree: &mut impl ValueTree<Value = Vec<u8>>,
    mut input: Vec<u8>,
    mut finding: Finding,
) -> (Vec<u8>, Finding) {
    if !tree.simplify() {
        return (input, finding);
    }
    for _ in 0..MAX_SHRINK_STEPS {
        let candidate = tree.current();
        match exec.check(&candidate) {
            Ok(_) => {
                if !tree.complicate() {
                    break;
                }
            }
            Err(Finding::Hang) => break,
            Err(f) => {
                input = candidate;
                finding = f;
                if !tree.simplify() {
                    break;
                }
            }
        }
    }
    (input, finding)
}

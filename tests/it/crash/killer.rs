//! The crash driver's trigger: armed for one phase of the work (intake, brain call, delivery)
//! and a countdown of that phase's events, it SIGKILLs the gateway process when the countdown
//! reaches zero — right inside the fake peer's handler, before the peer answers, or after a
//! short random delay, so the process dies in the middle of what it does with the answer.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

/// Where in the work a kill lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// The Talk poller received new messages (before or while they are committed).
    TalkIntake,
    /// A webhook trigger is being POSTed.
    WebhookIntake,
    /// The LLM received an answer request.
    Brain,
    /// Talk created the gateway's post (the gateway has not seen the 201 yet).
    TalkPost,
    /// The callback receiver got an answer (the gateway has not seen the 200 yet).
    Callback,
    /// No armed event came in time: killed at a random moment by the driver.
    Timer,
}

impl Phase {
    pub const ARMABLE: [Phase; 5] = [
        Phase::TalkIntake,
        Phase::WebhookIntake,
        Phase::Brain,
        Phase::TalkPost,
        Phase::Callback,
    ];
}

struct Arm {
    phase: Phase,
    remaining: u32,
    /// `None`: kill inside the event; otherwise after this delay.
    delay: Option<Duration>,
}

pub struct Killer {
    pid: AtomicI32,
    armed: Mutex<Option<Arm>>,
    /// Bumped after every kill.
    kills: watch::Sender<u32>,
    by_phase: Mutex<BTreeMap<Phase, u32>>,
    /// Every kill: its phase and whether it landed inside the peer's handler.
    log: Mutex<Vec<(Phase, bool)>>,
}

impl Default for Killer {
    fn default() -> Self {
        Self {
            pid: AtomicI32::new(0),
            armed: Mutex::new(None),
            kills: watch::channel(0).0,
            by_phase: Mutex::default(),
            log: Mutex::default(),
        }
    }
}

impl Killer {
    /// The process to kill from now on (0 = none).
    pub fn set_pid(&self, pid: i32) {
        self.pid.store(pid, Ordering::SeqCst);
    }

    /// Takes the pid back (no kill can reach the process afterwards).
    pub fn take_pid(&self) -> i32 {
        self.pid.swap(0, Ordering::SeqCst)
    }

    pub fn arm(&self, phase: Phase, countdown: u32, delay: Option<Duration>) {
        *self.armed.lock().unwrap() = Some(Arm {
            phase,
            remaining: countdown.max(1),
            delay,
        });
    }

    pub fn disarm(&self) {
        self.armed.lock().unwrap().take();
    }

    pub fn subscribe(&self) -> watch::Receiver<u32> {
        self.kills.subscribe()
    }

    pub fn by_phase(&self) -> BTreeMap<Phase, u32> {
        self.by_phase.lock().unwrap().clone()
    }

    /// Kills of `phase` that landed inside the peer's handler, before it answered.
    pub fn in_handler(&self, phase: Phase) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, inside)| *p == phase && *inside)
            .count()
    }

    /// A fake peer saw an event of `phase`.
    pub fn event(self: &Arc<Self>, phase: Phase) {
        let fire = {
            let mut armed = self.armed.lock().unwrap();
            match armed.as_mut() {
                Some(a) if a.phase == phase => {
                    a.remaining -= 1;
                    if a.remaining == 0 {
                        armed.take().map(|a| a.delay)
                    } else {
                        None
                    }
                }
                _ => None,
            }
        };
        match fire {
            None => {}
            Some(None) => {
                let pid = self.take_pid();
                self.sigkill(pid, phase, true);
            }
            Some(Some(delay)) => {
                let pid = self.take_pid();
                let this = self.clone();
                // The delay is the randomised moment of the crash, not a synchronisation.
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    this.sigkill(pid, phase, false);
                });
            }
        }
    }

    /// SIGKILLs the current process now, counted under `phase`.
    pub fn kill_now(&self, phase: Phase) {
        let pid = self.take_pid();
        self.sigkill(pid, phase, false);
    }

    fn sigkill(&self, pid: i32, phase: Phase, inside: bool) {
        if pid <= 0 {
            return;
        }
        // SAFETY: plain kill(2) on our own child, whose pid was taken exactly once.
        let done = unsafe { libc::kill(pid, libc::SIGKILL) };
        assert_eq!(done, 0, "kill -KILL {pid} failed");
        *self.by_phase.lock().unwrap().entry(phase).or_default() += 1;
        self.log.lock().unwrap().push((phase, inside));
        self.kills.send_modify(|n| *n += 1);
    }
}

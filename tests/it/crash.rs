//! Crash safety and peer faults (issue #9): the real `ctxgate serve` killed again and again while
//! it works (`suite`), and the in-process gateway meeting failing peers (`faults`). Both use fakes
//! that follow the peers' published documents: the fake Talk server of `ctxgate-talk` (nextcloud/
//! spreed `docs/chat.md`, `docs/conversation.md`) behind a fault-injecting proxy, a fake
//! OpenAI-compatible LLM (the OpenAI Chat Completions API reference) and a receiver of the
//! webhook channel's signed callbacks.

mod faults;
mod gateway;
mod hooks;
mod killer;
mod llm;
mod proxy;
mod store;
mod suite;
mod world;

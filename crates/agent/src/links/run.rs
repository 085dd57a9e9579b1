//! The link watcher's task: subscribe, replay, then serve events and the
//! periodic presence check until cancelled (DESIGN §12 step 3, §4.4).

use std::io;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::message::{LinkEvent, Message};
use super::metrics::EventKind;
use super::netlink::{dump_links, LinkEvents, Received};
use super::ports::TapPorts;
use super::watcher::{Attacher, Watcher};

/// Runs the watcher until `cancel` fires, then hands it back. Each new
/// value of `ports` (the committed plan's taps and ports) is applied as it
/// comes; a closed channel leaves the last one in force.
///
/// Start it only once the trie is populated (DESIGN §12: a tap attached
/// before would key its first packets `miss` for good). It subscribes to
/// link events, then replays the existing links (a link that appears
/// between the two is in the dump or in the queued events, so none is
/// missed), runs a presence check, and then serves events as they come and
/// a presence check every `presence_interval`.
///
/// Nothing here panics or ends the task on bad input: a malformed message
/// is counted and skipped; an overflowed socket (lost events) triggers an
/// immediate replay and presence check; a failed subscription or receive is
/// counted and retried at the next tick, presence checks going on
/// meanwhile. Attacher calls are synchronous system calls and a TCX attach
/// is slow (about 28 ms per tap measured on kernel 6.18, 0.15 ms with
/// cls_bpf), so on a multi-thread runtime they run through
/// `block_in_place` and never stall the tasks queued behind this one.
pub async fn run<A: Attacher>(
    mut watcher: Watcher<A>,
    presence_interval: Duration,
    mut ports: watch::Receiver<TapPorts>,
    cancel: CancellationToken,
) -> Watcher<A> {
    let mut ports_open = true;
    let mut events = None;
    resync(&mut watcher, &mut events).await;
    let mut tick = tokio::time::interval_at(Instant::now() + presence_interval, presence_interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            // Cancellation first, then events before the tick: an event
            // already queued is applied before a presence check would count
            // its link as healed.
            biased;
            () = cancel.cancelled() => break,
            got = next(&mut events) => match got {
                Ok(Received::Frames(frames)) => {
                    for frame in frames {
                        if handle(&mut watcher, frame.message) {
                            resync(&mut watcher, &mut events).await;
                        }
                    }
                }
                Ok(Received::Overrun) => {
                    watcher.metrics().event(EventKind::Overrun);
                    tracing::warn!("link events lost (socket overrun); replaying");
                    resync(&mut watcher, &mut events).await;
                }
                Err(e) => {
                    watcher.metrics().event(EventKind::SocketError);
                    tracing::warn!(error = %e, "link event socket failed; re-subscribing at the next presence check");
                    events = None;
                }
            },
            changed = ports.changed(), if ports_open => {
                if changed.is_ok() {
                    let now = ports.borrow_and_update().clone();
                    kernel(|| watcher.set_ports(now));
                } else {
                    ports_open = false;
                }
            }
            _ = tick.tick() => {
                if events.is_none() {
                    resync(&mut watcher, &mut events).await;
                } else {
                    kernel(|| watcher.presence_check());
                }
            }
        }
    }
    watcher
}

/// The next datagram, or never while unsubscribed.
async fn next(events: &mut Option<LinkEvents>) -> io::Result<Received> {
    match events {
        Some(e) => e.recv().await,
        None => std::future::pending().await,
    }
}

/// Applies one message; `true` when it says events were lost.
fn handle<A: Attacher>(watcher: &mut Watcher<A>, message: Message) -> bool {
    let metrics = watcher.metrics().clone();
    match message {
        Message::Link(event) => {
            metrics.event(match event {
                LinkEvent::Present { .. } => EventKind::NewLink,
                LinkEvent::Gone { .. } => EventKind::DelLink,
            });
            kernel(|| watcher.apply(&event));
        }
        Message::Overrun => {
            metrics.event(EventKind::Overrun);
            return true;
        }
        Message::Malformed(why) => {
            metrics.event(EventKind::Malformed);
            tracing::warn!(
                why,
                "malformed link event; skipped (the presence check covers it)"
            );
        }
        Message::Done | Message::Error(_) | Message::Ignored => metrics.event(EventKind::Ignored),
    }
    false
}

/// Subscribes if not subscribed, replays every link, checks presence.
async fn resync<A: Attacher>(watcher: &mut Watcher<A>, events: &mut Option<LinkEvents>) {
    let metrics = watcher.metrics().clone();
    if events.is_none() {
        match LinkEvents::subscribe() {
            Ok(s) => *events = Some(s),
            Err(e) => {
                metrics.event(EventKind::SocketError);
                tracing::warn!(error = %e, "subscribing to link events failed; retrying at the next presence check");
            }
        }
    }
    match dump_links().await {
        Ok(dump) => {
            metrics.events_by(EventKind::DumpLink, dump.links.len() as u64);
            metrics.events_by(EventKind::Malformed, dump.malformed as u64);
            metrics.events_by(EventKind::Ignored, dump.ignored as u64);
            kernel(|| watcher.replay(&dump.links));
        }
        Err(e) => {
            metrics.event(EventKind::SocketError);
            tracing::warn!(error = %e, "listing links failed; the presence check still runs");
        }
    }
    kernel(|| watcher.presence_check());
}

/// Runs blocking attacher work: off the async worker on a multi-thread
/// runtime, inline on a current-thread one (where `block_in_place` is not
/// available).
fn kernel<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::registry::Registry;

    use super::*;
    use crate::links::fake::{Call, Fake};
    use crate::links::matcher::Matcher;
    use crate::links::metrics::LinkMetrics;

    fn watcher() -> Watcher<Fake> {
        let fake = Fake::default();
        fake.host.borrow_mut().interfaces.insert(4, "tap4".into());
        Watcher::new(
            fake,
            Matcher::new(["tap"], Vec::<String>::new()),
            LinkMetrics::new(&mut Registry::default()),
        )
    }

    #[test]
    fn each_message_is_counted_by_kind_and_only_links_reach_the_state_machine() {
        let mut w = watcher();
        let sequence = [
            Message::Malformed("attribute length"),
            Message::Ignored,
            Message::Error(0),
            Message::Done,
            Message::Link(LinkEvent::Present {
                index: 4,
                name: "tap4".into(),
            }),
            Message::Link(LinkEvent::Gone { index: 4 }),
        ];
        for m in sequence {
            assert!(!handle(&mut w, m), "no resync asked");
        }
        assert_eq!(*w.attacher().calls.borrow(), [Call::Attach("tap4".into())]);
        let m = w.metrics();
        assert_eq!(m.events(EventKind::Malformed), 1);
        assert_eq!(m.events(EventKind::Ignored), 3);
        assert_eq!(m.events(EventKind::NewLink), 1);
        assert_eq!(m.events(EventKind::DelLink), 1);
        assert_eq!(m.attached(), 0);
    }

    #[test]
    fn an_overrun_asks_for_a_resync() {
        let mut w = watcher();
        assert!(handle(&mut w, Message::Overrun));
        assert_eq!(w.metrics().events(EventKind::Overrun), 1);
        assert!(w.attacher().calls.borrow().is_empty());
    }
}

//! The live loop: commands dispatched to the executors concurrently,
//! responses fed back in the order they arrive, humans asked, the journal
//! written before anything it records takes effect.

use super::replay::Keep;
use super::*;

/// What the executors answer: a command's key and its response (or the
/// cassette's miss).
type Answer = (String, Result<Response, Miss>);

/// An answer there is at once, and when its proposal is kept.
type Ready = (String, Result<Response, Miss>, Keep);

impl Driver {
    /// The live loop: dispatch, await, feed, until the run terminates or
    /// pauses.
    pub(super) async fn live(&mut self, program: Arc<Program>, max_concurrency: usize) -> Result<(), RunError> {
        let mut inflight: JoinSet<Answer> = JoinSet::new();
        let mut parked: Vec<String> = Vec::new();
        let heartbeat = Duration::from_millis(10_000);
        let mut stop = self.signals.take().unwrap_or_else(|| StopSignals::new(self.opts.cancel_on_ctrl_c));
        loop {
            // Group commit: the events of steps that dispatch nothing
            // external wait here for the next boundary — an external call,
            // a human, a pause, the end (see `persist`).
            self.collect()?;
            if !matches!(self.engine.status(), RunStatus::Running) {
                self.persist()?;
                inflight.abort_all();
                break;
            }
            // Answers computed at once (pure builtin tools, humans answered
            // now), in issue order.
            let ready = self.dispatch(&program, &mut inflight, &mut parked, max_concurrency)?;
            parked.retain(|k| self.known.contains_key(k));
            let waiting_on_human = parked.first().cloned();
            if !ready.is_empty() {
                for (key, result, keep) in ready {
                    // What the run does after it stopped changes nothing.
                    if !matches!(self.engine.status(), RunStatus::Running) {
                        break;
                    }
                    self.feed_answer(&key, result, keep, &mut inflight)?;
                }
                continue;
            }
            // About to wait for what is in flight (or to pause): what was
            // collected is made durable first.
            self.persist()?;
            if inflight.is_empty() {
                match waiting_on_human {
                    Some(key) => {
                        self.engine.pause(&key);
                        self.flush()?;
                    }
                    None => {
                        return Err(RunError::Diverged("the control plane is waiting for nothing (a runtime bug)".into()));
                    }
                }
                break;
            }
            tokio::select! {
                joined = inflight.join_next() => {
                    let Some(joined) = joined else { continue };
                    let (key, result) = joined.map_err(|e| RunError::Storage(format!("an executor panicked: {e}")))?;
                    self.feed_answer(&key, result, Keep::Now, &mut inflight)?;
                }
                _ = tokio::time::sleep(heartbeat), if !self.opts.clock.is_fake() => {
                    self.engine.heartbeat();
                }
                signal = stop.recv() => {
                    if signal == "SIGINT" {
                        tracing::info!("cancelled by SIGINT");
                        inflight.abort_all();
                        self.engine.cancel();
                        continue;
                    }
                    // The machine is going down, not the run: stop the work
                    // in flight (its process groups with it) and leave the
                    // run as a crash would, for `flow resume`.
                    tracing::info!(signal, "stopped; the run stays resumable");
                    inflight.abort_all();
                    self.stopped_by = Some(signal);
                    break;
                }
            }
        }
        drop(inflight);
        crate::exec::groups::stop_all().await;
        // Stopped by a signal: what was computed is kept, as at any boundary.
        self.persist()?;
        Ok(())
    }

    /// Feeds an answer to the engine; a cassette's miss stops the run.
    fn feed_answer(
        &mut self,
        key: &str,
        result: Result<Response, Miss>,
        keep: Keep,
        inflight: &mut JoinSet<Answer>,
    ) -> Result<(), RunError> {
        match result {
            Ok(response) => self.feed(key, response, keep),
            Err(Miss(m)) => {
                inflight.abort_all();
                Err(RunError::ReplayMiss(m))
            }
        }
    }

    /// Dispatches the queued commands in issue order, up to
    /// `max_concurrency` in flight. Gives the answers there are at once: pure
    /// builtin tools, then at most one human's (the loop feeds it before
    /// asking anyone else). A question nobody can answer now is parked: the
    /// run pauses on it when nothing else is running.
    fn dispatch(
        &mut self,
        program: &Program,
        inflight: &mut JoinSet<Answer>,
        parked: &mut Vec<String>,
        max_concurrency: usize,
    ) -> Result<Vec<Ready>, RunError> {
        let mut ready = Vec::new();
        while let Some(key) = self.queue.front().cloned() {
            let Some(command) = self.known.get(&key).cloned() else {
                self.queue.pop_front();
                continue;
            };
            if let Request::Human(h) = &command.request {
                self.queue.pop_front();
                // Asking someone is an effect: what led to it is durable first.
                self.persist()?;
                // Past the subject's timeout: `control` records `timeout`.
                if self.overdue(&key) {
                    ready.push((key, Ok(timed_out(&command.request, 0)), Keep::Now));
                    break;
                }
                match self.answer_now(&command.request, h)? {
                    // An answer that came after the deadline (a slow prompt)
                    // is too late.
                    Some(_) if self.overdue(&key) => {
                        tracing::warn!(subject = %h.subject, "the decision came after its deadline: it timed out");
                        ready.push((key, Ok(timed_out(&command.request, 0)), Keep::Now));
                        break;
                    }
                    Some(answer) => {
                        ready.push((key, Ok(answer), Keep::Now));
                        break;
                    }
                    None => parked.push(key),
                }
                continue;
            }
            if inflight.len() >= max_concurrency {
                break;
            }
            self.queue.pop_front();
            let mut delay = command.delay_ms;
            match &command.request {
                Request::Tool(t) => delay += self.rate_delay(program, &t.tool),
                Request::Agent(a) => delay += self.rate_delay(program, &a.agent),
                _ => {}
            }
            if self.opts.clock.is_fake() {
                delay = 0;
            }
            // A call that needs no waiting is answered here, without a task.
            if delay == 0 {
                if let Some(result) = self.exec.execute_now(&command.request) {
                    tracing::debug!(key = %command.key, kind = command.request.kind(), "answered at once");
                    ready.push((key, result, Keep::Grouped));
                    continue;
                }
            }
            // Dispatching is an effect: what led to it is durable first,
            // and the writer must still hold the run (a commit checks its
            // fence; with nothing to commit, the journal is asked).
            if !self.persist()? {
                self.journal.check_fence()?;
            }
            let timeout = self.timeout_for(&command);
            tracing::debug!(key = %command.key, kind = command.request.kind(), delay, "dispatching");
            inflight.spawn(execute(self.exec.clone(), command, delay, timeout));
        }
        Ok(ready)
    }

    /// A human's answer now: the cassette's (a strict replay without one
    /// stops the run), else the asker's; `None` when nobody answers now.
    /// Whether the decision `key` waits on is past its deadline, by the
    /// driver's clock.
    fn overdue(&self, key: &str) -> bool {
        self.engine.decision_expires_at(key).is_some_and(|at| crate::clock::rfc3339(self.opts.clock.now_ms()).as_str() >= at)
    }

    fn answer_now(&mut self, request: &Request, h: &HumanRequest) -> Result<Option<Response>, RunError> {
        match self.exec.replayed(request) {
            Ok(Some(answer)) => {
                self.exec.record_human(request, &answer);
                return Ok(Some(answer));
            }
            Ok(None) => {}
            Err(Miss(m)) if self.opts.replay.as_ref().is_some_and(|(_, mode)| *mode == ReplayMode::Strict) => {
                return Err(RunError::ReplayMiss(m))
            }
            Err(_) => {}
        }
        let Some(answer) = self.opts.asker.as_mut().and_then(|a| a.ask(h)) else { return Ok(None) };
        let response = Response::Human(answer);
        self.exec.record_human(request, &response);
        Ok(Some(response))
    }
}

/// Executes one command after `delay` ms, within `timeout` ms (a command
/// that takes longer is answered as timed out).
async fn execute(exec: Arc<Executors>, command: Arc<Command>, delay: u64, timeout: Option<u64>) -> Answer {
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let result = match timeout {
        Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), exec.execute(&command.request, Some(ms))).await {
            Ok(r) => r,
            Err(_) => Ok(timed_out(&command.request, ms)),
        },
        None => exec.execute(&command.request, None).await,
    };
    (command.key.clone(), result)
}

/// SIGINT (cancel), SIGTERM and SIGHUP (stop), when the driver listens
/// for signals (the CLI). Made before the run directory is: from then on a
/// signal is never lost (it waits for the live loop) and never kills the
/// process outright.
pub(super) struct StopSignals {
    signals: Option<[tokio::signal::unix::Signal; 3]>,
}

impl std::fmt::Debug for StopSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopSignals").field("listening", &self.signals.is_some()).finish()
    }
}

impl StopSignals {
    pub(super) fn new(listen: bool) -> StopSignals {
        use tokio::signal::unix::{signal, SignalKind};
        let make =
            || Some([signal(SignalKind::interrupt()).ok()?, signal(SignalKind::terminate()).ok()?, signal(SignalKind::hangup()).ok()?]);
        StopSignals { signals: if listen { make() } else { None } }
    }

    /// The name of the next signal; never, when not listening.
    async fn recv(&mut self) -> &'static str {
        match &mut self.signals {
            Some([int, term, hup]) => tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
                _ = hup.recv() => "SIGHUP",
            },
            None => std::future::pending().await,
        }
    }
}

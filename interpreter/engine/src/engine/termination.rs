//! Termination: the success condition and the result type checked,
//! leases released, policies owing an obligation reported, the run ended.

use super::*;

impl Engine {
    /// The run's result: with a declared `output`, the latest output of a
    /// node of that type (else the latest output); without, the latest.
    pub(super) fn result(&self) -> Option<&(String, ArtifactRef)> {
        self.result_output.as_ref().or(self.last_output.as_ref())
    }

    pub(super) fn terminate(&mut self, reason: &str, status: TerminationStatus, cause: &Str, message: Option<&str>) {
        if !self.running() {
            return;
        }
        let held = || Effect::Terminate { reason: reason.to_string(), status, cause: held(), message: message.map(str::to_string) };
        if !self.admit(Obs::Terminated(reason), "run_terminated", cause, held) {
            return;
        }
        let mut status = self.checked_success(status, cause);
        if let Some(m) = message {
            self.emit("control", events::warning(m.to_string()), Some(cause));
        }
        // Cancel what is still running: leases released, no further dispatch.
        let ids: Vec<String> = self.attempts.keys().cloned().collect();
        for id in ids {
            self.release(&id, cause);
        }
        self.waiting.clear();
        self.commands.clear();
        // Policies violated by the termination itself, or owing an
        // obligation it leaves open, are reported now.
        status = self.report_at_end(reason, status, cause);
        let output = self.result().map(|(_, a)| a.clone());
        self.emit("control", events::run_terminated(reason, status, output), Some(cause));
        self.status = RunStatus::Terminated { reason: reason.to_string(), status: status.to_string(), budget_exhausted: self.budget_hit };
    }

    /// A `success` ending holds only if the workflow's success condition
    /// holds and its result is of the workflow's `output` type; otherwise
    /// the run fails, with a warning saying why.
    fn checked_success(&mut self, status: TerminationStatus, cause: &Str) -> TerminationStatus {
        let mut status = status;
        if status == TerminationStatus::Success {
            if let Some(cond) = self.wf().success().cloned() {
                if !eval::eval_bool(&cond, &self.env).unwrap_or(false) {
                    status = TerminationStatus::Failure;
                    self.emit("control", events::warning(format!("success condition {} is false", eval::render(&cond))), Some(cause));
                }
            }
        }
        // A run that succeeds returns a value of the workflow's `output` type.
        if status == TerminationStatus::Success {
            if let Some(ty) = self.wf().output_type().cloned() {
                let (from, value) = match self.result().cloned() {
                    Some((node, _)) => (format!("`{node}`'s output"), self.env.get(&node).cloned().unwrap_or(Value::Null)),
                    None => ("no output".to_string(), Value::Null),
                };
                let problem = match self.validator("workflow.output", "", &ty) {
                    Ok(v) => v.validate(&value).err().map(|errors| errors.join("; ")),
                    Err(e) => Some(e),
                };
                if let Some(problem) = problem {
                    status = TerminationStatus::Failure;
                    let message = format!("invalid output: the run's result ({from}) is not the workflow's `output` type {ty}: {problem}");
                    self.emit("control", events::warning(message), Some(cause));
                }
            }
        }
        status
    }
}

//! The coordinator: the one loop that applies effects. A machine pushes
//! the effects that follow from its step ([`Engine::then`]); the loop pops
//! the next one, applies it through the machine it names, and puts what
//! that machine pushed in front of the rest, in the order it was pushed:
//! effects are applied depth first and in order, each with everything it
//! leads to before its next sibling.

use super::*;

impl Engine {
    /// Asks for `effect` to be applied once the current machine step ends.
    pub(super) fn then(&mut self, effect: Effect) {
        self.effects.push(effect);
    }

    /// Applies every pending effect (and what each leads to). The effects a
    /// step pushed lie on top of the stack in push order; they are reversed
    /// there so the first pushed is popped first.
    pub(super) fn drive(&mut self) {
        self.effects.reverse();
        while let Some(effect) = self.effects.pop() {
            let mark = self.effects.len();
            self.apply(effect);
            self.effects[mark..].reverse();
        }
    }

    /// Applies one effect through the machine it names.
    fn apply(&mut self, effect: Effect) {
        match effect {
            Effect::StartNode { name, input, trigger, cause } => self.start_node(&name, input, trigger, &cause),
            Effect::Fanout { node, input, started, next } => self.fanout(&node, input, &started, next),
            Effect::FinishEnd { name, reason, status, cause } => self.finish_end(&name, &reason, status, &cause),
            Effect::FinishParallel { name, cause } => self.finish_parallel(&name, &cause),
            Effect::CompleteNode { name, output, status, cause, known } => {
                self.complete_node(&name, output, status, &cause, known.map(|k| *k))
            }
            Effect::Follow { from, cause } => self.follow(&from, &cause),
            Effect::Append { node, next, cause } => self.append_next(&node, next, &cause),
            Effect::WriteRecords { owner, next, cause } => self.write_records(owner, next, &cause),
            Effect::StartAttempt { node, trigger, cause } => self.start_attempt(node, trigger, &cause),
            Effect::BeginAttempt { node, trigger, cause } => self.begin_attempt(&node, trigger, &cause),
            Effect::AttemptSucceeded { attempt, output, cause } => self.attempt_succeeded(&attempt, output, &cause),
            Effect::AttemptFailed { attempt, code, message, cause } => self.attempt_failed(&attempt, code, &message, &cause),
            Effect::NodeFailed { node, event, code, message, cause } => self.node_event_failed(&node, event, code, &message, &cause),
            Effect::WorkflowEvent { event, node, cause, default_reason, message } => {
                self.workflow_event(event, node.as_deref(), &cause, &default_reason, &message)
            }
            Effect::NextTurn { attempt, delay, cause } => self.next_turn(&attempt, delay, &cause),
            Effect::ActOnReply { attempt, node, agent, reply, error, turn } => {
                self.act_on_reply(&attempt, &node, agent, *reply, error, &turn)
            }
            Effect::CallTool { call, cause } => self.call_tool(*call, &cause),
            Effect::ToolRefused { attempt, tool, message, cause } => self.feed_tool_error(&attempt, &tool, &message, &cause),
            Effect::AfterTool { attempt, from_agent, tool, result, done } => self.after_tool(&attempt, from_agent, &tool, *result, &done),
            Effect::Cross { from, to, via, cause } => self.cross(&from, &to, via, &cause),
            Effect::Enter { from, to, via, cause } => self.enter(&from, &to, via, &cause),
            Effect::Transfer { from, to, input, cause } => self.resume_transfer(&from, &to, *input, &cause),
            Effect::JoinArrival { join, from, cause } => self.join_arrival(&join, &from, &cause),
            Effect::TryJoin { join, cause } => self.try_join(&join, &cause),
            Effect::RoundEnd { lp, cause } => self.round_end(&lp, &cause),
            Effect::MapNext { map, cause } => self.map_next(&map, &cause),
            Effect::EvaluateGate { gate, cause } => self.evaluate_gate(&gate, &cause),
            Effect::RecordGate { name, body, action, ctx, cause } => self.record_gate(&name, *body, action, *ctx, &cause),
            Effect::Ask { decision, principals, prompt, decisions, cause } => self.ask(*decision, principals, prompt, decisions, &cause),
            Effect::Decide { decision, request_event, answer } => self.on_decision(*decision, &request_event, *answer),
            Effect::Act { action, ctx, scope, cause } => self.act(&action, &ctx, scope, &cause),
            Effect::Zones { changes, cause } => self.zone_changes(changes, &cause),
            Effect::Exhausted { ex, node, cause } => self.exhausted(ex, node.as_deref(), &cause),
            Effect::Terminate { reason, status, cause, message } => self.terminate(&reason, status, &cause, message.as_deref()),
            Effect::Expire { key, attempt, unknown_tool, cause } => self.expire(&key, &attempt, &cause, unknown_tool),
        }
    }
}

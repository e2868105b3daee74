//! The keys of commands: how the control plane names the data-plane work it
//! asked for, and how proposals, the journal and `flow approve` name what
//! they answer. Formatted and parsed here only.

use std::fmt;

/// A command's key, borrowed from its parts (or from the key it was
/// parsed from).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommandKey<'a> {
    /// An agent's model turn: `{attempt}/t{turn}`.
    Turn { attempt: &'a str, turn: u32 },
    /// A tool call of an attempt: `{attempt}/c{n}`.
    Call { attempt: &'a str, n: u32 },
    /// A question to a human: `decision/{subject}/{round}`.
    Decision { subject: &'a str, round: u32 },
    /// A gate evaluator's probe of one item: `probe/{gate}/{visit}/{evaluator}.{item}`.
    Probe { gate: &'a str, visit: u32, evaluator: usize, item: usize },
}

impl<'a> CommandKey<'a> {
    /// The key as commands, proposals and the journal write it.
    pub fn to_key(&self) -> String {
        self.to_string()
    }

    /// The key a string is, if it is one.
    pub fn parse(key: &'a str) -> Option<CommandKey<'a>> {
        if let Some(rest) = key.strip_prefix("decision/") {
            let (subject, round) = rest.rsplit_once('/')?;
            return Some(CommandKey::Decision { subject, round: round.parse().ok()? }).filter(|_| !subject.is_empty());
        }
        if let Some(rest) = key.strip_prefix("probe/") {
            let (rest, indices) = rest.rsplit_once('/')?;
            let (gate, visit) = rest.rsplit_once('/')?;
            let (evaluator, item) = indices.split_once('.')?;
            return Some(CommandKey::Probe {
                gate,
                visit: visit.parse().ok()?,
                evaluator: evaluator.parse().ok()?,
                item: item.parse().ok()?,
            });
        }
        let (attempt, last) = key.rsplit_once('/')?;
        if attempt.is_empty() {
            return None;
        }
        if let Some(turn) = last.strip_prefix('t') {
            return Some(CommandKey::Turn { attempt, turn: turn.parse().ok()? });
        }
        let n = last.strip_prefix('c')?.parse().ok()?;
        Some(CommandKey::Call { attempt, n })
    }

    /// The subject a decision key asks about.
    pub fn subject(&self) -> Option<&'a str> {
        match self {
            CommandKey::Decision { subject, .. } => Some(subject),
            _ => None,
        }
    }
}

impl fmt::Display for CommandKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandKey::Turn { attempt, turn } => write!(f, "{attempt}/t{turn}"),
            CommandKey::Call { attempt, n } => write!(f, "{attempt}/c{n}"),
            CommandKey::Decision { subject, round } => write!(f, "decision/{subject}/{round}"),
            CommandKey::Probe { gate, visit, evaluator, item } => write!(f, "probe/{gate}/{visit}/{evaluator}.{item}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_reads_back_as_itself() {
        let keys = [
            CommandKey::Turn { attempt: "write#2.1", turn: 3 },
            CommandKey::Call { attempt: "research#1.2", n: 1 },
            CommandKey::Decision { subject: "confirm.publish.write#1.1", round: 2 },
            CommandKey::Decision { subject: "g", round: 1 },
            CommandKey::Probe { gate: "audio", visit: 1, evaluator: 2, item: 0 },
        ];
        for key in keys {
            let text = key.to_key();
            assert_eq!(CommandKey::parse(&text), Some(key), "{text}");
        }
        assert_eq!(CommandKey::parse("decision/g/1").and_then(|k| k.subject()), Some("g"));
        for junk in ["", "x", "/t1", "a/x1", "a/t", "decision//1", "decision/g/one", "probe/g/1/2", "probe/g/x/1.2"] {
            assert_eq!(CommandKey::parse(junk), None, "{junk}");
        }
    }
}

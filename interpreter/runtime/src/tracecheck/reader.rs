//! The trace reader: blocks of lines parsed on a thread while the events
//! already read are checked, so a long trace is checked as it is read.

use super::*;

/// How much of a trace is read and parsed at a time by [`check_reader`].
pub(super) const BLOCK: usize = 1 << 20;

/// The events of one block of lines, and its lines that are not events.
pub(super) struct Batch {
    pub(super) events: Vec<Event>,
    /// The digest of each event's line (the hash chain).
    pub(super) digests: Vec<[u8; 32]>,
    /// Lines that are not events: (0-based line in the block, seq, why, text).
    pub(super) malformed: Vec<(usize, Option<u64>, String, String)>,
    /// Non-blank lines.
    pub(super) lines: usize,
    /// Line breaks in the block.
    pub(super) breaks: usize,
}

/// Parses the lines of a block (split at `\n`; the last may be empty).
pub(super) fn parse_block(block: &[u8]) -> Batch {
    parse_block_into(block, Vec::with_capacity(block.len() / 256))
}

/// [`parse_block`], appending to `events` (empty; its capacity is reused).
pub(super) fn parse_block_into(block: &[u8], events: Vec<Event>) -> Batch {
    let digests = Vec::with_capacity(events.capacity());
    let mut batch = Batch { events, digests, malformed: Vec::new(), lines: 0, breaks: 0 };
    let mut count = 0;
    // One UTF-8 check for the whole block (and a fast search for line
    // breaks); a block that is not UTF-8 is read line by line.
    match std::str::from_utf8(block) {
        Ok(text) => {
            for (i, line) in text.split('\n').enumerate() {
                count += 1;
                parse_line(&mut batch, Ok(line), i);
            }
        }
        Err(_) => {
            for (i, line) in block.split(|&b| b == b'\n').enumerate() {
                count += 1;
                parse_line(&mut batch, std::str::from_utf8(line).map_err(|_| line), i);
            }
        }
    }
    batch.breaks = count.max(1) - 1;
    batch
}

/// One line (`i`: 0-based in its block), or its bytes when they are not UTF-8.
pub(super) fn parse_line(batch: &mut Batch, line: Result<&str, &[u8]>, i: usize) {
    let (parsed, text) = match line {
        Ok(line) => {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.trim().is_empty() {
                return;
            }
            (flow_trace::event_from_str(line).map_err(|e| e.to_string()), std::borrow::Cow::Borrowed(line))
        }
        Err(bytes) => (Err("the line is not UTF-8".to_string()), String::from_utf8_lossy(bytes)),
    };
    batch.lines += 1;
    match parsed {
        Ok(event) => {
            batch.digests.push(flow_trace::chain::digest(text.as_bytes()));
            batch.events.push(event);
        }
        Err(err) => {
            let seq = serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|v| v.get("seq").and_then(|s| s.as_u64()));
            batch.malformed.push((i, seq, err, shorten(&text, 120)));
        }
    }
}

/// The deviation of a line that is not an event (`line`: 1-based).
pub(super) fn malformed_line(line: usize, seq: Option<u64>, err: &str, text: String) -> Deviation {
    let mut d = Deviation::new(codes::MALFORMED, seq, format!("line {line} is not a trace event: {err}"))
        .expected("an event valid against trace-event.schema.json")
        .actual(text);
    d.line = Some(line);
    d
}

/// Reads `reader` in blocks of about `block` bytes of whole lines and
/// hands them out in turn to the parsers. Buffers the parsers are done
/// with come back on `spare` and are filled again: fresh ones would cost
/// the kernel a page fault and a page of zeroes every 4 KiB.
pub(super) fn read_blocks(
    mut reader: impl Read,
    block: usize,
    parsers: &[std::sync::mpsc::SyncSender<std::io::Result<Vec<u8>>>],
    spare: &std::sync::mpsc::Receiver<Vec<u8>>,
) {
    let mut carry: Vec<u8> = Vec::new();
    // Whose turn it is: blocks go to the parsers strictly in turn.
    let mut turn = 0;
    loop {
        let mut buffer = spare.try_recv().unwrap_or_default();
        let start = carry.len();
        let full = start + block;
        // A reused buffer's bytes are overwritten, not zeroed again.
        if buffer.len() < full {
            buffer.resize(full, 0);
        }
        buffer[..start].copy_from_slice(&carry);
        carry.clear();
        let mut filled = start;
        let eof = loop {
            match reader.read(&mut buffer[filled..full]) {
                Ok(0) => break true,
                Ok(n) => {
                    filled += n;
                    if filled == full {
                        break false;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = parsers[turn % parsers.len()].send(Err(e));
                    return;
                }
            }
        };
        buffer.truncate(filled);
        // Whole lines only; the rest waits for more (or is the last line).
        let end = if eof { buffer.len() } else { buffer.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) };
        carry.extend_from_slice(&buffer[end..]);
        buffer.truncate(end);
        if end > 0 || eof {
            if parsers[turn % parsers.len()].send(Ok(buffer)).is_err() {
                return;
            }
            turn += 1;
        }
        if eof {
            return;
        }
    }
}

/// Checks a JSONL trace as it is read, with bounded memory whatever its
/// length: a thread reads blocks of lines, two parse them in turn, and this
/// one checks the events in order. The report is that of [`check_text`] on
/// the whole text, except that a line that is not an event excuses a gap in
/// `seq` only from its own block on.
pub fn check_reader(program: &Program, reader: impl Read + Send, options: &Options) -> std::io::Result<Report> {
    check_blocks(program, reader, options, BLOCK)
}

/// [`check_reader`], reading `block` bytes at a time.
pub(super) fn check_blocks(program: &Program, reader: impl Read + Send, options: &Options, block: usize) -> std::io::Result<Report> {
    use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
    const PARSERS: usize = 2;
    std::thread::scope(|scope| {
        let mut to_parsers: Vec<SyncSender<std::io::Result<Vec<u8>>>> = Vec::new();
        let mut parsed: Vec<Receiver<std::io::Result<Batch>>> = Vec::new();
        let mut give_back: Vec<Sender<Batch>> = Vec::new();
        let (spare_block, spare_blocks) = channel::<Vec<u8>>();
        for _ in 0..PARSERS {
            let (send_block, blocks) = sync_channel::<std::io::Result<Vec<u8>>>(1);
            let (send_batch, batches) = sync_channel::<std::io::Result<Batch>>(2);
            let (back, used) = channel::<Batch>();
            let spare_block = spare_block.clone();
            scope.spawn(move || parse_blocks(blocks, send_batch, used, spare_block));
            to_parsers.push(send_block);
            parsed.push(batches);
            give_back.push(back);
        }
        drop(spare_block);
        scope.spawn(move || read_blocks(reader, block, &to_parsers, &spare_blocks));
        let mut lines = 0;
        let mut line_breaks = 0;
        let mut parse_deviations = Vec::new();
        let mut checker: Option<Checker<'_>> = None;
        // Blocks held back until the first `run_started` (it chooses the
        // workflow), or the end.
        let mut waiting: Vec<(usize, Batch)> = Vec::new();
        let mut feed = |checker: &mut Checker<'_>, turn: usize, mut batch: Batch, parse_deviations: &mut Vec<Deviation>| {
            lines += batch.lines;
            for (i, seq, err, text) in batch.malformed.drain(..) {
                checker.malformed.extend(seq);
                parse_deviations.push(malformed_line(line_breaks + i + 1, seq, &err, text));
            }
            line_breaks += batch.breaks;
            for (event, digest) in batch.events.iter().zip(&batch.digests) {
                checker.link(event, *digest);
                checker.event(event);
            }
            let _ = give_back[turn % PARSERS].send(batch);
        };
        // Blocks went to the parsers in turn: take them back in turn.
        for turn in 0.. {
            let Ok(batch) = parsed[turn % PARSERS].recv() else { break };
            let batch = batch?;
            match &mut checker {
                Some(c) => feed(c, turn, batch, &mut parse_deviations),
                None => {
                    let started = started_of(&batch.events).map(|(w, d)| (w.to_string(), d.to_string()));
                    waiting.push((turn, batch));
                    if let Some((workflow, digest)) = started {
                        let mut c = Checker::new(program, Some((&workflow, &digest)), options);
                        for (turn, batch) in waiting.drain(..) {
                            feed(&mut c, turn, batch, &mut parse_deviations);
                        }
                        checker = Some(c);
                    }
                }
            }
        }
        let c = match checker {
            Some(c) => c,
            None => {
                let mut c = Checker::new(program, None, options);
                for (turn, batch) in waiting.drain(..) {
                    feed(&mut c, turn, batch, &mut parse_deviations);
                }
                c
            }
        };
        let mut report = c.finish();
        report.trace.lines = lines;
        parse_deviations.append(&mut report.deviations);
        sort(&mut parse_deviations);
        report.conformant = parse_deviations.is_empty();
        report.deviations = parse_deviations;
        Ok(report)
    })
}

/// A parser thread: parses the blocks it is sent into batches, in order;
/// hands each block back for reuse, and refills the event vectors of the
/// batches the checker gives back.
fn parse_blocks(
    blocks: std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>,
    send_batch: std::sync::mpsc::SyncSender<std::io::Result<Batch>>,
    used: std::sync::mpsc::Receiver<Batch>,
    spare_block: std::sync::mpsc::Sender<Vec<u8>>,
) {
    let mut spare_events: Vec<Event> = Vec::new();
    for block in blocks {
        // Checked batches are freed here, by the thread that made them:
        // freed across threads, the allocator would take fresh pages from
        // the system. Their event vector is filled again.
        while let Ok(mut done) = used.try_recv() {
            done.events.clear();
            if done.events.capacity() > spare_events.capacity() {
                spare_events = done.events;
            }
        }
        let batch = block.map(|b| {
            let batch = parse_block_into(&b, std::mem::take(&mut spare_events));
            let _ = spare_block.send(b);
            batch
        });
        if send_batch.send(batch).is_err() {
            return;
        }
    }
}

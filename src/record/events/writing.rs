//! What the handler writes as a whole: the recording's chunks, the live windows'
//! logs, the frames' names and the file's end; the first error writing it is kept,
//! and recording stops on it.

use super::{Counters, EventHandler, Writer};
use crate::format::{FrameSymbols, Recording};

/// What is left of the handler once the recording ends (see [`EventHandler::end`]).
pub(in crate::record) struct Ended {
    /// The recording, its summary and end still to write.
    pub writer: Writer,
    pub counters: Counters,
    /// The first error writing the recording, if any.
    pub write_error: Option<std::io::Error>,
    /// CPU time the written samples' stacks stand for.
    pub sampled_ns: u64,
}

impl EventHandler {
    /// The recording being written, to read.
    pub(in crate::record) fn writer(&self) -> &Writer {
        &self.writer
    }

    /// Takes the current live window's samples and events from the writer.
    pub(in crate::record) fn take_live(&mut self) -> Option<Recording> {
        self.writer.take_live()
    }

    /// Whether writing the recording failed (recording stops on it).
    pub(in crate::record) fn write_failed(&self) -> bool {
        self.write_error.is_some()
    }

    /// Writes out the chunk being filled; false when that failed (the error is kept
    /// for the end).
    pub(in crate::record) fn flush_chunk(&mut self) -> bool {
        match self.writer.flush_chunk() {
            Ok(()) => true,
            Err(e) => {
                self.write_error = Some(e);
                false
            }
        }
    }

    /// Writes the frames' names, unless writing already failed.
    pub(in crate::record) fn write_symbols(&mut self, symbols: &[FrameSymbols]) {
        if self.write_error.is_none()
            && let Err(e) = self.writer.symbols(symbols)
        {
            self.write_error = Some(e);
        }
    }

    /// Ends the handler: what the summary and the file's end need.
    pub(in crate::record) fn end(self) -> Ended {
        Ended {
            writer: self.writer,
            counters: self.counters,
            write_error: self.write_error,
            sampled_ns: self.ledger.sampled_ns,
        }
    }
}

//! The events chunk of a recording decoded: samples, thread events, mappings,
//! frames, stack nodes, off-CPU intervals, lost and throttled counts, each id
//! checked to name something defined before it.

use super::super::codec::{Decoder, Malformed};
use super::super::writer::tag;
use super::super::*;

impl Recording {
    pub(super) fn decode_events(&mut self, payload: &[u8]) -> Result<(), Malformed> {
        let mut d = Decoder::new(payload);
        // Times are stored as deltas from the previous event's.
        let mut last_time: u64 = 0;
        let mut time = |d: &mut Decoder| -> Result<u64, Malformed> {
            last_time = last_time.wrapping_add(d.i64()? as u64);
            Ok(last_time)
        };
        while !d.is_empty() {
            match d.u8()? {
                tag::SAMPLE => {
                    let time = time(&mut d)?;
                    let sample = self.decode_sample(&mut d, time)?;
                    self.samples.push(sample);
                }
                t @ (tag::THREAD_NAME | tag::THREAD_START | tag::THREAD_EXIT | tag::EXEC) => {
                    let time = time(&mut d)?;
                    self.thread_events
                        .push(decode_thread_event(t, &mut d, time)?);
                }
                tag::MAPPING => {
                    let time = time(&mut d)?;
                    self.mappings.push(decode_mapping(&mut d, time)?);
                }
                tag::FRAME => {
                    let frame = self.decode_frame(&mut d)?;
                    self.frames.push(frame);
                }
                tag::STACK_NODE => {
                    let parent = self.opt_id(d.u64()?, self.nodes.len())?;
                    let frame = d.u32()?;
                    if frame as usize >= self.frames.len() {
                        return Err(Malformed);
                    }
                    self.nodes.push(StackNode { parent, frame });
                }
                tag::OFF_CPU if self.version >= 2 => {
                    let time = time(&mut d)?;
                    let off = self.decode_off_cpu(&mut d, time)?;
                    self.off_cpu.push(off);
                }
                tag::LOST => {
                    let _time = time(&mut d)?;
                    self.lost += d.u64()?;
                }
                tag::THROTTLE => {
                    let _time = time(&mut d)?;
                    self.throttled += 1;
                }
                _ => return Err(Malformed),
            }
        }
        Ok(())
    }

    /// A sample event's fields after its time.
    fn decode_sample(&self, d: &mut Decoder, time: u64) -> Result<Sample, Malformed> {
        let (pid, tid, cpu) = (d.u32()?, d.u32()?, d.u32()?);
        let weight = d.u64()?;
        let stack = self.opt_id(d.u64()?, self.nodes.len())?;
        Ok(Sample {
            time,
            pid,
            tid,
            cpu,
            weight,
            stack,
        })
    }

    /// A frame's fields, its mapping checked to be defined.
    fn decode_frame(&self, d: &mut Decoder) -> Result<Frame, Malformed> {
        let kind = match d.u8()? {
            0 => FrameKind::User,
            1 => FrameKind::Kernel,
            2 => FrameKind::Truncated,
            3 => FrameKind::Return,
            4 => FrameKind::Interpreted,
            _ => return Err(Malformed),
        };
        let pid = d.u32()?;
        let addr = d.u64()?;
        let mapping = self.opt_id(d.u64()?, self.mappings.len())?;
        Ok(Frame {
            kind,
            pid,
            addr,
            mapping,
        })
    }

    /// An off-CPU event's fields after its time.
    fn decode_off_cpu(&self, d: &mut Decoder, time: u64) -> Result<OffCpu, Malformed> {
        let (pid, tid, cpu) = (d.u32()?, d.u32()?, d.u32()?);
        let duration = d.u64()?;
        let state = ThreadState::from_code(d.u8()?)
            .filter(|s| s.is_off_cpu())
            .ok_or(Malformed)?;
        let weight = d.u64()?;
        let stack = self.opt_id(d.u64()?, self.nodes.len())?;
        Ok(OffCpu {
            time,
            pid,
            tid,
            cpu,
            duration,
            state,
            weight,
            stack,
        })
    }
}

/// A thread event (`t`: its tag) after its time.
fn decode_thread_event(t: u8, d: &mut Decoder, time: u64) -> Result<ThreadEvent, Malformed> {
    Ok(match t {
        tag::THREAD_NAME => {
            let (pid, tid) = (d.u32()?, d.u32()?);
            let name = d.string()?;
            ThreadEvent::Name {
                time,
                pid,
                tid,
                name,
            }
        }
        tag::THREAD_START => {
            let (pid, ppid, tid) = (d.u32()?, d.u32()?, d.u32()?);
            ThreadEvent::Start {
                time,
                pid,
                ppid,
                tid,
            }
        }
        tag::THREAD_EXIT => {
            let (pid, tid) = (d.u32()?, d.u32()?);
            ThreadEvent::Exit { time, pid, tid }
        }
        _ => ThreadEvent::Exec {
            time,
            pid: d.u32()?,
        },
    })
}

/// A mapping event after its time.
fn decode_mapping(d: &mut Decoder, time: u64) -> Result<Mapping, Malformed> {
    let pid = d.u32()?;
    let start = d.u64()?;
    let end = start.checked_add(d.u64()?).ok_or(Malformed)?;
    let file_offset = d.u64()?;
    let path = d.string()?;
    let id = d.bytes()?;
    Ok(Mapping {
        pid,
        start,
        end,
        file_offset,
        path,
        build_id: (!id.is_empty()).then(|| id.to_vec()),
        time,
    })
}

//! A page cache in front of another [`Memory`], for the few moments one sample's frames
//! are read: a chain of interpreter frames and the code objects it names sit on a few
//! pages, so each page is read once (one system call) instead of once per field.
//! Dropped (or [`Pages::clear`]ed) after the sample, so that it never serves memory
//! older than the sample to the next one; or after the samples handled in one round
//! of the recorder, when each one's chain was copied at its instant and only what
//! does not change under a running thread is read (`replay::python`). Pages fetched
//! ahead of use in one system call ([`Memory::prefetch`]) join the cache when first
//! read.

use super::{AddrMap, Memory};
use std::cell::RefCell;

const PAGE: u64 = 4096;
/// Pages kept at most: a runaway walk reads the target no more than this.
const MAX_PAGES: usize = 256;

/// Pages read, by address (None: could not be read).
pub type PageMap = AddrMap<Option<Box<[u8]>>>;

/// `inner`, read a page at a time and remembered.
pub struct Pages<M> {
    inner: M,
    /// Each page read, or None for one that could not be.
    pages: RefCell<PageMap>,
    /// Pages read ahead of use ([`Memory::prefetch`]): each moves to `pages` when
    /// first read, so that `pages` holds only what was used.
    ahead: RefCell<PageMap>,
}

impl<M: Memory> Pages<M> {
    /// `inner` with no page read yet.
    pub fn new(inner: M) -> Pages<M> {
        Pages {
            inner,
            pages: RefCell::default(),
            ahead: RefCell::default(),
        }
    }

    /// Forgets every page read.
    pub fn clear(&self) {
        self.pages.borrow_mut().clear();
        self.ahead.borrow_mut().clear();
    }

    /// How many pages are kept (read, or read ahead and not used yet).
    pub fn cached(&self) -> usize {
        self.pages.borrow().len() + self.ahead.borrow().len()
    }

    /// Takes every page read out (the cache is left empty): a view of the memory as
    /// it was when they were read, to be put back with [`Pages::restore`].
    pub fn take(&self) -> PageMap {
        self.ahead.borrow_mut().clear();
        std::mem::take(&mut *self.pages.borrow_mut())
    }

    /// Puts back pages taken earlier, in place of those read since.
    pub fn restore(&self, pages: PageMap) {
        *self.pages.borrow_mut() = pages;
    }

    /// The memory underneath.
    pub fn inner(&self) -> &M {
        &self.inner
    }
}

impl<M: Memory> Memory for Pages<M> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        let mut done = 0usize;
        while done < buf.len() {
            let Some(at) = addr.checked_add(done as u64) else {
                return false;
            };
            let page = at & !(PAGE - 1);
            let off = (at - page) as usize;
            let n = (PAGE as usize - off).min(buf.len() - done);
            let mut pages = self.pages.borrow_mut();
            if let Some(read) = pages.get(&page) {
                // One lookup when the page is there, as it mostly is.
                let Some(bytes) = read else {
                    return false;
                };
                buf[done..done + n].copy_from_slice(&bytes[off..off + n]);
                done += n;
                continue;
            }
            let read = match self.ahead.borrow_mut().remove(&page) {
                Some(read) => read,
                None if pages.len() >= MAX_PAGES => {
                    // Past the budget: read through, uncached.
                    drop(pages);
                    if !self.inner.read(at, &mut buf[done..done + n]) {
                        return false;
                    }
                    done += n;
                    continue;
                }
                None => {
                    let mut bytes = vec![0u8; PAGE as usize].into_boxed_slice();
                    self.inner.read(page, &mut bytes).then_some(bytes)
                }
            };
            let Some(bytes) = pages.entry(page).or_insert(read) else {
                return false;
            };
            buf[done..done + n].copy_from_slice(&bytes[off..off + n]);
            done += n;
        }
        true
    }

    fn pages_read(&self) -> Vec<u64> {
        let pages = self.pages.borrow();
        let mut read: Vec<u64> = (pages.iter())
            .filter_map(|(&a, p)| p.as_ref().map(|_| a))
            .collect();
        read.sort_unstable();
        read
    }

    fn prefetch(&self, addrs: &[u64]) {
        let pages = self.pages.borrow();
        let mut ahead = self.ahead.borrow_mut();
        let room = MAX_PAGES.saturating_sub(pages.len() + ahead.len());
        let mut wanted: Vec<u64> = (addrs.iter())
            .map(|&a| a & !(PAGE - 1))
            .filter(|a| !pages.contains_key(a) && !ahead.contains_key(a))
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        wanted.truncate(room);
        let got = self.inner.read_pages(&wanted, PAGE as usize);
        ahead.extend(wanted.into_iter().zip(got));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::Snapshot;
    use std::cell::Cell;

    struct Counting<'a>(&'a Snapshot, Cell<usize>);
    impl Memory for Counting<'_> {
        fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
            self.1.set(self.1.get() + 1);
            self.0.read(addr, buf)
        }
    }

    #[test]
    fn a_page_is_read_once_and_reads_span_pages() {
        let mut s = Snapshot::default();
        s.insert(0x1000, (0..8192u32).map(|i| i as u8).collect());
        let p = Pages::new(Counting(&s, Cell::new(0)));
        assert_eq!(p.u64_at(0x1008), s.u64_at(0x1008));
        assert_eq!(p.u32_at(0x1100), s.u32_at(0x1100));
        assert_eq!(p.inner().1.get(), 1);
        assert_eq!(p.u64_at(0x1ffc), s.u64_at(0x1ffc), "across two pages");
        assert_eq!(p.inner().1.get(), 2);
        assert_eq!(p.u64_at(0x3000), None, "an unreadable page");
        p.clear();
        assert_eq!(p.u64_at(0x1008), s.u64_at(0x1008));
        assert_eq!(p.inner().1.get(), 4);
    }

    #[test]
    fn prefetched_pages_serve_later_reads() {
        let mut s = Snapshot::default();
        s.insert(0x1000, vec![3; 8192]);
        let first = Pages::new(&s);
        assert_eq!(first.u64_at(0x1008), Some(0x0303_0303_0303_0303));
        assert_eq!(first.u64_at(0x2ff8), Some(0x0303_0303_0303_0303));
        assert_eq!(first.u64_at(0x5000), None);
        assert_eq!(first.pages_read(), [0x1000, 0x2000]);
        let again = Pages::new(Counting(&s, Cell::new(0)));
        again.prefetch(&first.pages_read());
        assert_eq!(again.inner().1.get(), 2);
        assert_eq!(again.u64_at(0x1100), Some(0x0303_0303_0303_0303));
        assert_eq!(again.u64_at(0x2100), Some(0x0303_0303_0303_0303));
        assert_eq!(again.inner().1.get(), 2, "served from the prefetched pages");
        // Only the pages used are the cache's; one fetched and never read is not.
        again.prefetch(&[0x1000, 0x2000, 0x9000]);
        assert_eq!(again.pages_read(), [0x1000, 0x2000]);
        assert_eq!(again.take().len(), 2);
    }

    #[test]
    fn pages_taken_then_restored_are_read_as_they_were() {
        let mut s = Snapshot::default();
        s.insert(0x1000, vec![1; 4096]);
        let p = Pages::new(Counting(&s, Cell::new(0)));
        assert_eq!(p.u64_at(0x1000), Some(0x0101_0101_0101_0101));
        let then = p.take();
        assert_eq!(then.len(), 1);
        // Taken out: the next read goes to the memory again.
        assert_eq!(p.u64_at(0x1000), Some(0x0101_0101_0101_0101));
        assert_eq!(p.inner().1.get(), 2);
        // Put back, altered as a stand-in for the page as it was then: served as is.
        let mut then = then;
        if let Some(Some(page)) = then.get_mut(&0x1000) {
            page[0] = 7;
        }
        p.restore(then);
        assert_eq!(p.u64_at(0x1000), Some(0x0101_0101_0101_0107));
        assert_eq!(p.inner().1.get(), 2);
    }
}

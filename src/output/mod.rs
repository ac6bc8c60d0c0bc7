//! Outputs: small adapters over one [`Profile`](crate::profile::Profile). Each turns
//! the model into one format; none re-reads the recording or aggregates on its own
//! beyond what its format needs.

pub mod flamegraph;
pub mod folded;
pub mod top;

use crate::profile::Profile;

/// The stack of a sample as display names, root first, optionally under its thread.
pub(crate) fn stack_names<'a>(
    profile: &'a Profile,
    stack: u32,
    thread: Option<u32>,
) -> impl Iterator<Item = std::borrow::Cow<'a, str>> + 'a {
    let root = thread.map(|t| {
        let t = &profile.threads[t as usize];
        [
            std::borrow::Cow::Owned(t.name.clone()),
            std::borrow::Cow::Owned(format!("tid {}", t.tid)),
        ]
    });
    root.into_iter()
        .flatten()
        .chain(profile.stacks[stack as usize].iter().map(|&f| {
            let func = &profile.functions[f as usize];
            let suffix = func.class.folded_suffix();
            if suffix.is_empty() {
                std::borrow::Cow::Borrowed(func.name.as_str())
            } else {
                std::borrow::Cow::Owned(format!("{}{suffix}", func.name))
            }
        }))
}

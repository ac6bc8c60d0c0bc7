//! The CPUs online now, whose events the recorder opens (sysfs `online`), the list
//! parsed by a pure function tested on text.

/// Parses a CPU list such as `0-3,5,7-8` (sysfs `online`).
fn parse_cpu_list(text: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    cpus.extend(a..=b);
                }
            }
            None => cpus.extend(part.parse::<u32>().ok()),
        }
    }
    cpus
}

/// The CPUs that are online now.
pub(super) fn online_cpus() -> Vec<u32> {
    let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|t| parse_cpu_list(&t))
        .unwrap_or_default();
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        (0..n).collect()
    } else {
        cpus
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,5,7-8\n"), [0, 1, 2, 3, 5, 7, 8]);
        assert_eq!(parse_cpu_list("0"), [0]);
        assert!(parse_cpu_list("").is_empty());
    }
}

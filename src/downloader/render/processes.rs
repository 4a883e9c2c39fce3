//! The memory of a browser: the resident size of a process and every
//! process below it (Chromium's renderers, GPU and utility processes are
//! its children), read from /proc.

use std::collections::HashMap;

/// Bytes resident in `pid` and its descendants; 0 where /proc cannot
/// tell (not Linux, or the process is gone).
pub fn tree_rss(pid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut parents: HashMap<u32, u32> = HashMap::new();
    for entry in dir.flatten() {
        let Some(child) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if let Some(parent) = parent_of(child) {
            parents.insert(child, parent);
        }
    }
    parents
        .keys()
        .copied()
        .chain(std::iter::once(pid))
        .filter(|p| descends_from(*p, pid, &parents))
        .map(rss_of)
        .sum()
}

/// Whether `p` is `root` or below it.
fn descends_from(mut p: u32, root: u32, parents: &HashMap<u32, u32>) -> bool {
    for _ in 0..64 {
        if p == root {
            return true;
        }
        match parents.get(&p) {
            Some(&up) if up != p => p = up,
            _ => return false,
        }
    }
    false
}

/// The parent of `pid`, from /proc/<pid>/stat (after the command name,
/// which may hold spaces and parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}

/// Resident bytes of `pid` (`VmRSS`).
fn rss_of(pid: u32) -> u64 {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_tree_has_memory() {
        let me = std::process::id();
        assert!(tree_rss(me) >= rss_of(me));
        assert!(rss_of(me) > 0);
        assert_eq!(parent_of(me), Some(std::os::unix::process::parent_id()));
    }
}

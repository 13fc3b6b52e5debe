//! Linux CPU lists (`0-3,8`), read as `k8s.io/utils/cpuset.Parse` reads them.

use crate::go;

/// How many CPUs the list `s` names (saturating); the empty list names none. Errors are
/// worded as Go's `strconv.Atoi` and `cpuset.Parse`. A CPU named twice counts twice
/// (upstream's set would count it once).
pub(crate) fn count(s: &str) -> Result<usize, String> {
    if s.is_empty() {
        return Ok(0);
    }
    let mut count = 0usize;
    for r in s.split(',') {
        match r.split_once('-') {
            None => {
                atoi(r)?;
                count = count.saturating_add(1);
            }
            Some((a, b)) => {
                let start = atoi(a)?;
                let end = atoi(b)?;
                if start > end {
                    return Err(format!("invalid range {} ({start} > {end})", go::quote(r)));
                }
                let n = end.abs_diff(start).saturating_add(1);
                count = count.saturating_add(usize::try_from(n).unwrap_or(usize::MAX));
            }
        }
    }
    Ok(count)
}

/// `strconv.Atoi`.
fn atoi(s: &str) -> Result<i64, String> {
    s.parse::<i64>().map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        format!("strconv.Atoi: parsing {}: {why}", go::quote(s))
    })
}

#[cfg(test)]
mod tests {
    use super::count as parse_cpuset;

    #[test]
    fn cpusets_parse_as_upstream() {
        assert_eq!(parse_cpuset(""), Ok(0));
        assert_eq!(parse_cpuset("0-3,8"), Ok(5));
        assert_eq!(parse_cpuset("1-1"), Ok(1));
        assert_eq!(
            parse_cpuset("0,,1"),
            Err("strconv.Atoi: parsing \"\": invalid syntax".to_string())
        );
        assert_eq!(
            parse_cpuset("99999999999999999999"),
            Err("strconv.Atoi: parsing \"99999999999999999999\": value out of range".to_string())
        );
    }
}

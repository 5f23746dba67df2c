//! Durations written as strings in the attribute: `"5s"`, `"250ms"`, `"1m30s"`, `"2h"`.

/// Milliseconds in `text`, or a message saying what is wrong with it.
pub(crate) fn parse_millis(text: &str) -> Result<u64, String> {
    const HINT: &str = "write a duration like \"5s\", \"250ms\", \"2m\", \"1h\" or \"1m30s\"";
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("empty duration; {HINT}"));
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("`{text}` is not a duration; {HINT}"));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("`{text}` is too large"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let per_unit = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "" => return Err(format!("`{text}` has a number without a unit; {HINT}")),
            unit => return Err(format!("unknown unit `{unit}` in `{text}`; {HINT}")),
        };
        rest = &rest[unit_len..];
        total = number
            .checked_mul(per_unit)
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(|| format!("`{text}` is too large"))?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::parse_millis;

    #[test]
    fn parses_units_and_sums() {
        assert_eq!(parse_millis("5s"), Ok(5_000));
        assert_eq!(parse_millis("250ms"), Ok(250));
        assert_eq!(parse_millis("2m"), Ok(120_000));
        assert_eq!(parse_millis("1h"), Ok(3_600_000));
        assert_eq!(parse_millis("1m30s"), Ok(90_000));
        assert_eq!(parse_millis("0s"), Ok(0));
    }

    #[test]
    fn refuses_what_is_not_a_duration() {
        for bad in [
            "",
            "5",
            "s",
            "5 s",
            "5x",
            "-1s",
            "1.5s",
            "99999999999999999999h",
        ] {
            assert!(parse_millis(bad).is_err(), "{bad:?} was accepted");
        }
    }
}

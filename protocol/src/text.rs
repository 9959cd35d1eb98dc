//! Cutting text to a byte budget without splitting a character: what bounds an error
//! message, a quoted stderr tail or a tool's output before it goes on the wire.

/// The longest start of `text` that fits in `max` bytes and ends on a character
/// boundary.
pub fn prefix_within(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The longest end of `text` that fits in `max` bytes and starts on a character
/// boundary.
pub fn suffix_within(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_never_split_a_character() {
        // "é" is two bytes: a budget that ends inside it leaves it out whole.
        let cases =
            [("héllo", 2, "h", "lo"), ("héllo", 3, "hé", "llo"), ("héllo", 10, "héllo", "héllo"), ("", 0, "", "")];
        for (text, max, prefix, suffix) in cases {
            assert_eq!(prefix_within(text, max), prefix, "prefix of {text:?} within {max}");
            assert_eq!(suffix_within(text, max), suffix, "suffix of {text:?} within {max}");
        }
        assert_eq!(suffix_within("aé", 1), "");
    }
}

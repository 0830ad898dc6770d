//! Line numbers of JSON array elements, so messages about a row of a JSON file can name its line.

/// The 1-based line on which each element of the top-level array `key`
/// starts, so messages about a JSON row can name its line.
pub(crate) fn array_element_lines(text: &str, key: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    let mut line = 1usize;
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut current = String::new();
    let mut last_string: Option<String> = None;
    let mut in_target = false;
    let mut want_element = false;
    for c in text.chars() {
        if c == '\n' {
            line += 1;
        }
        if in_string {
            if escaped {
                escaped = false;
                current.push(c);
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
                if depth == 1 {
                    last_string = Some(std::mem::take(&mut current));
                }
            } else if depth == 1 {
                current.push(c);
            }
            continue;
        }
        if want_element && !c.is_whitespace() && c != ']' {
            lines.push(line);
            want_element = false;
        }
        match c {
            '"' => {
                in_string = true;
                current.clear();
            }
            '{' | '[' => {
                depth += 1;
                if c == '[' && depth == 2 && last_string.as_deref() == Some(key) {
                    in_target = true;
                    want_element = true;
                }
            }
            '}' | ']' => {
                if in_target && depth == 2 {
                    return lines;
                }
                depth = depth.saturating_sub(1);
            }
            ',' => {
                if in_target && depth == 2 {
                    want_element = true;
                }
                if depth == 1 {
                    last_string = None;
                }
            }
            _ => {}
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_lines_of_a_nested_array() {
        let text = "{\n  \"a\": \"rows\",\n  \"rows\": [\n    {\"x\": \"}\\\"\"},\n    {\"y\": [1, 2]}\n  ],\n  \"z\": [0]\n}";
        assert_eq!(array_element_lines(text, "rows"), vec![4, 5]);
        assert_eq!(array_element_lines(text, "z"), vec![7]);
        assert_eq!(array_element_lines(text, "missing"), Vec::<usize>::new());
    }
}

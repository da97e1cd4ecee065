// File names and other bytes from outside, as text: a name on Linux is any
// bytes but NUL and '/', while a message is one line and a JSON report
// holds only UTF-8. Every message and report field that shows such bytes
// goes through printable().
#pragma once
#include <string>
#include <string_view>

namespace chunkinv {

// `s` as one line of valid UTF-8: valid UTF-8 (but for control characters)
// is kept as it is, every other byte is written \xNN ("bad\xff.npz",
// "a\x0ab" for a newline). Text that is valid stays the same.
std::string printable(std::string_view s);

// Whether `s` is valid UTF-8 without control characters, and so shows as it is.
bool is_plain_text(std::string_view s);

}  // namespace chunkinv

// Package personalmatch finds one member's personal data in a text in the
// spellings a partner may echo it back, and replaces it with
// events.Redacted.
//
// An exact substring is not enough: the onboarding event says
// +84912345678 and the partner answers 0912 345 678; the event says
// 1987-06-05 and the spec's Customer Info gives dates as 05-06-1987; the
// event says Nguyễn Văn An and the partner writes NGUYEN VAN AN. A Matcher
// is built once per event from events.PersonalFields (through
// MemberOnboardRequested.PersonalData) and compares two normalised views
// of a text with normalised needles:
//
//   - digits: the text's ASCII digits, where spaces, dashes, dots, slashes,
//     '+' and parentheses between digits are dropped. A phone is matched on
//     its last nine digits (the national significant number of a Vietnamese
//     mobile, so +84, 84 and a leading 0 all match); a numeric ID or
//     passport number on all its digits; a date (birthday, and the ID
//     document's issueDate and expireDate) on its yyyyMMdd, ddMMyyyy and
//     MMddyyyy spellings (padded or not) and its epoch milliseconds and
//     seconds at midnight UTC and at midnight +07:00. A match redacts the
//     whole digit run it is in, prefix and separators included.
//   - letters: the text lower-cased, with Latin diacritics stripped
//     (Vietnamese included, đ as d; combining marks dropped, so decomposed
//     text folds too) and runs of white space made one space. Names,
//     e-mail, address, places and ID numbers match in any case, with or
//     without diacritics.
//
// Values shorter than three letters or six digits are not matched: they
// identify no one, and redacting them would mangle every text. Matching
// is by substring, on the side of redacting too much.
//
// The cost is linear in the text for each needle; a Matcher holds a few
// dozen needles, and the texts it sees are capped (internal/partnertext).
//
// The package does not know which fields are personal (internal/events
// does) nor which texts are published (internal/bridge does).
package personalmatch

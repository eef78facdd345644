package ops

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Object names under a tenant's prefix (pipectl upload, upload-url).
//
// A name is the part of a key after the tenant's prefix. It must stay inside the prefix and read
// the same to every tool on the way, so it holds, per S3's object key guide
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html):
//   - S3's "safe characters" (0-9, a-z, A-Z and ! - _ . * ' ( )), the prefixes' own set
//     (internal/tenants, CheckPrefix), and "/" between folders;
//   - and, so that a customer's file names need no renaming, a space and printable non-ASCII
//     characters (Japanese, accented letters): UTF-8 is what S3 stores, the SDK percent-encodes
//     them in the request and the pipeline decodes the event's key before it routes it.
//
// Refused: the guide's "characters to avoid" (\ { ^ } % ` ] " > [ ~ < # |), its characters that
// "might require special handling" other than the space (& $ @ = ; : + , ?), control characters
// (ASCII 0-31 and 127, and Unicode's C1 and format controls), invalid UTF-8, a leading "/", and
// empty, "." or ".." segments: S3 keeps "a/../b" as it is, but tools that normalize paths do not,
// so such a name could land outside the prefix, or somewhere other than its writer meant.

// NameChars names the characters a name may hold, as messages say them.
const NameChars = "letters, digits, ! - _ . * ' ( ), space, printable non-ASCII characters, and / between folders"

// maxKeyBytes is S3's limit on a key's length: 1,024 bytes of UTF-8 (the object key guide).
const maxKeyBytes = 1024

// CheckObjectName checks a name to be put under a tenant's prefix. The message quotes the name
// and says what to change.
func CheckObjectName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("the object name is empty")
	case !utf8.ValidString(name):
		return fmt.Errorf("object name %q is not valid UTF-8, which S3 keys are", name)
	case strings.HasPrefix(name, "/"):
		return fmt.Errorf("object name %q starts with \"/\": a name is relative to the tenant's prefix, e.g. %q", name, strings.TrimLeft(name, "/"))
	case len(name) > maxKeyBytes:
		return fmt.Errorf("object name %q is %d bytes; an S3 key is at most %d bytes", name, len(name), maxKeyBytes)
	}
	var bad []string
	for _, r := range name {
		if nameRune(r) {
			continue
		}
		q := fmt.Sprintf("%q", string(r))
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			q = fmt.Sprintf("control character %U", r)
		}
		if !slices.Contains(bad, q) {
			bad = append(bad, q)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("object name %q contains %s, outside the characters a name may hold (%s)", name, strings.Join(bad, ", "), NameChars)
	}
	for _, seg := range strings.Split(name, "/") {
		switch seg {
		case "":
			return fmt.Errorf("object name %q has an empty segment (a trailing or doubled \"/\"): name a file, with one \"/\" between folders", name)
		case ".", "..":
			return fmt.Errorf("object name %q has a %q segment, which would leave the tenant's prefix or be removed by tools that normalize paths", name, seg)
		}
	}
	return nil
}

// nameRune reports whether r may appear in a name.
func nameRune(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	case r < utf8.RuneSelf:
		return strings.ContainsRune("!-_.*'()/ ", r)
	}
	// Non-ASCII: printable, and not a format control (a right-to-left override would make a name
	// read differently from what it is).
	return unicode.IsPrint(r) && !unicode.Is(unicode.Cf, r)
}

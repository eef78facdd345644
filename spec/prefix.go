package spec

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Key prefixes.
//
// S3 event notifications carry an object's key URL-encoded, a space as "+" (the S3 User Guide,
// "Event message structure": "The s3.object.key value ... is URL encoded. For example, "red
// flower.jpg" becomes "red+flower.jpg""), https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html.
// The prefixes "a b/" and "a+b/" would then both match the event key "a+b/x.csv", and one
// tenant's file would reach another. A prefix is therefore made of S3's "safe characters" only,
// which no encoding changes: https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html
// ("Safe characters": 0-9, a-z, A-Z and ! - _ . * ' ( )), and "/" to separate its segments.

// SafePrefixChars names the characters a prefix may hold, as messages and the README say them.
const SafePrefixChars = "letters, digits, ! - _ . * ' ( ) /"

// safePrefixByte reports whether b may appear in a prefix: an ASCII letter or digit, one of S3's
// safe special characters, or "/".
func safePrefixByte(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return strings.IndexByte("!-_.*'()/", b) >= 0
}

// CheckPrefix checks the form of a key prefix: it ends in "/", has no leading "/", no empty, "."
// or ".." segment, and only safe characters. The message starts with the prefix, quoted, and
// eg is an example of a valid prefix for the fix. Segments "." and ".." are refused because S3
// keeps them as they are while tools that normalize paths (the console, SDK transfer managers
// with a local directory) do not, so a file put as "in/./x.csv" may not arrive under "in/".
func CheckPrefix(prefix, eg string) error {
	if prefix == "" || strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("%q is invalid: a prefix is a non-empty key prefix ending in \"/\" without a leading \"/\", e.g. %q", prefix, eg)
	}
	if len(prefix) > 512 {
		return fmt.Errorf("%q is invalid: must be at most 512 bytes", prefix)
	}
	var unsafe []string
	for i := 0; i < len(prefix); i++ {
		if b := prefix[i]; !safePrefixByte(b) {
			// Name the character as the user wrote it: a whole UTF-8 sequence, else the byte.
			c := prefix[i : i+1]
			if r, n := utf8.DecodeRuneInString(prefix[i:]); r != utf8.RuneError || n > 1 {
				c = prefix[i : i+n]
				i += n - 1
			}
			if q := fmt.Sprintf("%q", c); !slices.Contains(unsafe, q) {
				unsafe = append(unsafe, q)
			}
		}
	}
	if len(unsafe) > 0 {
		return fmt.Errorf("%q contains %s, which %s not in the safe set (%s): S3 event keys are URL-encoded, so such a prefix could match another tenant's files",
			prefix, strings.Join(unsafe, ", "), isAre(len(unsafe)), SafePrefixChars)
	}
	for _, seg := range strings.Split(strings.TrimSuffix(prefix, "/"), "/") {
		switch seg {
		case "":
			return fmt.Errorf("%q has an empty segment (\"//\"): use one \"/\" between segments, e.g. %q", prefix, eg)
		case ".", "..":
			return fmt.Errorf("%q has a %q segment, which tools that normalize paths would remove: name the folder, e.g. %q", prefix, seg, eg)
		}
	}
	return nil
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// PrefixesOverlap reports whether a key can start with both prefixes, so that one file would reach
// two tenants.
func PrefixesOverlap(a, b string) bool { return strings.HasPrefix(a, b) || strings.HasPrefix(b, a) }

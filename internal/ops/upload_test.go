package ops

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Names are checked against S3's object key guide's lists
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html), one known answer each.
func TestCheckObjectName(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		wantErr string // "": accepted
	}{
		{"safe characters", "Orders_2026-11.v2(final)!'*.csv", ""},
		{"a folder", "2026/11/orders.csv", ""},
		{"a space", "red flower.csv", ""},
		{"Japanese", "受注データ 2026年11月.csv", ""},
		{"accents", "café-résumé.csv", ""},
		{"empty", "", "is empty"},
		{"a leading slash", "/etc/passwd", `starts with "/"`},
		{"up and out", "../other/x.csv", `has a ".." segment`},
		{"up in the middle", "a/../../b.csv", `has a ".." segment`},
		{"a dot segment", "a/./b.csv", `has a "." segment`},
		{"a trailing slash", "folder/", "empty segment"},
		{"a doubled slash", "a//b.csv", "empty segment"},
		{"a newline", "a\nb.csv", "control character U+000A"},
		{"a NUL", "a\x00b", "control character U+0000"},
		{"DEL", "a\x7fb", "control character U+007F"},
		{"a C1 control", "a\u0085b", "control character U+0085"},
		{"a right-to-left override", "invoice\u202Ecsv.exe", "control character U+202E"},
		{"a backslash (to avoid)", `a\b.csv`, `"\\"`},
		{"a percent sign (to avoid)", "100%.csv", `"%"`},
		{"a hash (to avoid)", "a#1.csv", `"#"`},
		{"braces, brackets, caret, tilde, pipe, quotes (to avoid)", "{a}[b]^~|\"<>`.csv", `"{"`},
		{"a plus (special handling)", "a+b.csv", `"+"`},
		{"an ampersand (special handling)", "a&b.csv", `"&"`},
		{"a question mark (special handling)", "a?.csv", `"?"`},
		{"a colon (special handling)", "a:b.csv", `":"`},
		{"a no-break space", "a\u00a0b.csv", `"\u00a0"`},
		{"invalid UTF-8", "a\xffb.csv", "not valid UTF-8"},
		{"too long", strings.Repeat("a", 1025), "at most 1024 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckObjectName(tc.in)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got %v, want the name accepted", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestCheckExpiry(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	longLived := aws.Credentials{AccessKeyID: "AKIA"}
	session := aws.Credentials{AccessKeyID: "ASIA", SessionToken: "t", CanExpire: true, Expires: now.Add(time.Hour)}
	for _, tc := range []struct {
		name    string
		expires time.Duration
		creds   aws.Credentials
		wantErr string
	}{
		{"the default", DefaultPresignExpiry, longLived, ""},
		{"one second", time.Second, longLived, ""},
		{"7 days, long-lived credentials", 7 * 24 * time.Hour, longLived, ""},
		{"past 7 days", 7*24*time.Hour + time.Second, longLived, "past S3's limit of 7 days"},
		{"zero", 0, longLived, "at least 1 second"},
		{"negative", -time.Minute, longLived, "at least 1 second"},
		{"within the session", time.Hour, session, ""},
		{"past the session", time.Hour + time.Second, session, "expire at 2026-11-30T13:00:00Z (in 1h0m0s)"},
		{"7 days, session", 7 * 24 * time.Hour, session, "outlives the temporary credentials"},
		{"an expired session", time.Minute, aws.Credentials{CanExpire: true, Expires: now.Add(-time.Second)}, "expired at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckExpiry(tc.expires, tc.creds, now)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got %v, want it accepted", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/example/tenantpipeline/internal/ops"
)

// presigned parses upload-url's text output: the URL on the first line, then the headers to send,
// "Name: value" a line, then a blank line and a curl command.
func presigned(t *testing.T, stdout string) (*url.URL, map[string]string, string) {
	t.Helper()
	head, curl, ok := strings.Cut(stdout, "\n\n")
	if !ok || !strings.HasPrefix(curl, "curl ") || strings.Count(curl, "\n") != 1 || !strings.HasSuffix(curl, "\n") {
		t.Fatalf("got stdout %q, want the URL, its headers, a blank line and one curl line", stdout)
	}
	lines := strings.Split(head, "\n")
	u, err := url.Parse(lines[0])
	if err != nil || u.Scheme != "https" {
		t.Fatalf("got first line %q, want the URL (%v)", lines[0], err)
	}
	headers := map[string]string{}
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			t.Fatalf("got header line %q, want Name: value", l)
		}
		headers[k] = v
	}
	return u, headers, curl
}

// upload-url prints a presigned PUT of <prefix><name>, signed with the operator's credentials,
// then the headers it signs, which the uploader must send, and a curl command that sends them: the
// URL is single-use (If-None-Match: *), binds the size with --bytes (with --max-bytes alone, the
// bound as x-amz-meta-max-bytes; at 5 GiB, one PUT's own, nothing), and the bucket's
// customer-managed key when it has one. A name with a space and Japanese arrives as it was typed
// (the SDK encodes it in the URL).
func TestUploadURL(t *testing.T) {
	const key = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	for _, tc := range []struct {
		name        string
		args        []string
		bucketKey   string
		wantSigned  string // X-Amz-SignedHeaders
		wantHeaders map[string]string
	}{
		{"the default", nil, "", "host;if-none-match", map[string]string{"If-None-Match": "*"}},
		{"an exact size", []string{"--bytes", "2048"}, "", "content-length;host;if-none-match",
			map[string]string{"If-None-Match": "*", "Content-Length": "2048"}},
		{"an exact size under --max-bytes", []string{"--bytes", "2048", "--max-bytes", "4096"}, "", "content-length;host;if-none-match",
			map[string]string{"If-None-Match": "*", "Content-Length": "2048"}},
		{"a bound without an exact size", []string{"--max-bytes", "1048576"}, "", "host;if-none-match;x-amz-meta-max-bytes",
			map[string]string{"If-None-Match": "*", "x-amz-meta-max-bytes": "1048576"}},
		{"the default bound is one PUT's, and S3's own", []string{"--max-bytes", "5368709120"}, "", "host;if-none-match", map[string]string{"If-None-Match": "*"}},
		{"a bound and a key", []string{"--max-bytes", "10"}, key,
			"host;if-none-match;x-amz-meta-max-bytes;x-amz-server-side-encryption;x-amz-server-side-encryption-aws-kms-key-id",
			map[string]string{"If-None-Match": "*", "x-amz-meta-max-bytes": "10", "x-amz-server-side-encryption": "aws:kms", "x-amz-server-side-encryption-aws-kms-key-id": key}},
		{"a customer-managed key", nil, key,
			"host;if-none-match;x-amz-server-side-encryption;x-amz-server-side-encryption-aws-kms-key-id",
			map[string]string{"If-None-Match": "*", "x-amz-server-side-encryption": "aws:kms", "x-amz-server-side-encryption-aws-kms-key-id": key}},
		{"a key and a size", []string{"--bytes", "5368709120"}, key,
			"content-length;host;if-none-match;x-amz-server-side-encryption;x-amz-server-side-encryption-aws-kms-key-id",
			map[string]string{"If-None-Match": "*", "Content-Length": "5368709120", "x-amz-server-side-encryption": "aws:kms",
				"x-amz-server-side-encryption-aws-kms-key-id": key}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := world()
			if tc.bucketKey != "" {
				w.BucketKeys = map[string]string{"ingest": tc.bucketKey}
			}
			code, stdout, stderr := runIn(t, w, append([]string{"upload-url", "acme", "受注 11月.csv"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("got exit %d, %s", code, stderr)
			}
			u, headers, curl := presigned(t, stdout)
			q := u.Query()
			if got, want := u.Path, "/inbox/acme/受注 11月.csv"; !strings.HasSuffix(got, want) {
				t.Errorf("got path %q, want it to end in %q", got, want)
			}
			if !strings.HasPrefix(u.Host, "ingest.") && !strings.HasPrefix(u.Path, "/ingest/") {
				t.Errorf("got %s, want the bucket ingest", u)
			}
			for k, want := range map[string]string{"X-Amz-Expires": "900", "X-Amz-SignedHeaders": tc.wantSigned} {
				if got := q.Get(k); got != want {
					t.Errorf("got %s=%q, want %q", k, got, want)
				}
			}
			if c := q.Get("X-Amz-Credential"); !strings.HasPrefix(c, "AKIAOPERATOR/") {
				t.Errorf("got credential %q, want the operator's", c)
			}
			if !maps.Equal(headers, tc.wantHeaders) {
				t.Errorf("got headers %v, want %v", headers, tc.wantHeaders)
			}
			for k, v := range tc.wantHeaders {
				if want := " -H " + ops.ShellQuote(k+": "+v); !strings.Contains(curl, want) {
					t.Errorf("got %q, want it to send %q", curl, want)
				}
			}
			if !strings.HasPrefix(curl, "curl --fail -T '受注 11月.csv' ") || !strings.HasSuffix(curl, " "+ops.ShellQuote(u.String())+"\n") {
				t.Errorf("got %q, want curl -T the file, then the URL", curl)
			}
			if len(w.Puts) != 0 || len(w.AssumeRoles) != 0 {
				t.Errorf("got %d puts and %d AssumeRole calls, want none: presigning writes nothing", len(w.Puts), len(w.AssumeRoles))
			}
		})
	}
}

// --json has the URL's fields and the headers to send; bytes with --bytes, maxBytes with
// --max-bytes alone. A URL over an hour
// needs --allow-long.
func TestUploadURLJSON(t *testing.T) {
	for _, tc := range []struct {
		name        string
		args        []string
		wantFields  []string
		wantSeconds string
		wantHeaders map[string]any
	}{
		{"the default", nil, []string{"expires", "headers", "key", "url"}, "900", map[string]any{"If-None-Match": "*"}},
		{"long, with a size", []string{"--expires", "2h", "--allow-long", "--bytes", "12"}, []string{"bytes", "expires", "headers", "key", "url"}, "7200",
			map[string]any{"If-None-Match": "*", "Content-Length": "12"}},
		{"a bound", []string{"--max-bytes", "4096"}, []string{"expires", "headers", "key", "maxBytes", "url"}, "900",
			map[string]any{"If-None-Match": "*", "x-amz-meta-max-bytes": "4096"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runIn(t, world(), append([]string{"upload-url", "acme", "a.csv", "--json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("got exit %d, %s", code, stderr)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatal(err)
			}
			if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, tc.wantFields) {
				t.Errorf("got fields %v, want %v", keys, tc.wantFields)
			}
			seconds, _ := strconv.Atoi(tc.wantSeconds)
			wantExpires := now.Add(time.Duration(seconds) * time.Second).Format(time.RFC3339)
			if got["key"] != "inbox/acme/a.csv" || got["expires"] != wantExpires {
				t.Errorf("got key %v, expires %v; want inbox/acme/a.csv, %s", got["key"], got["expires"], wantExpires)
			}
			if h, _ := got["headers"].(map[string]any); !maps.Equal(h, tc.wantHeaders) {
				t.Errorf("got headers %v, want %v", got["headers"], tc.wantHeaders)
			}
			if _, sized := got["bytes"]; sized && got["bytes"] != 12.0 {
				t.Errorf("got bytes %v, want 12", got["bytes"])
			}
			if _, bound := got["maxBytes"]; bound && got["maxBytes"] != 4096.0 {
				t.Errorf("got maxBytes %v, want 4096", got["maxBytes"])
			}
			u, _ := url.Parse(got["url"].(string))
			if e := u.Query().Get("X-Amz-Expires"); e != tc.wantSeconds {
				t.Errorf("got X-Amz-Expires %q, want %s", e, tc.wantSeconds)
			}
		})
	}
}

// --role signs with a session of the pool's uploader role, tagged with the tenant, that lasts a
// minute longer than the URL (at least AssumeRole's 900 seconds, at most the role's hour). The
// clock is within a second, as STS's answer is counted in whole seconds: a session asked for
// exactly the URL's lifetime ended before the URL, and the default 15 minutes were refused.
// A one-hour URL, whose session may last no longer, ends with its session.
func TestUploadURLRole(t *testing.T) {
	w, _ := pooledWorld()
	w.Now = now.Add(700 * time.Millisecond)
	w.SetUploaderRole("shared", "arn:aws:iam::123456789012:role/shared-uploader")
	for _, tc := range []struct {
		expires     string
		wantSeconds int32
		wantURL     string // X-Amz-Expires
	}{{"5m", 900, "300"}, {"15m", 960, "900"}, {"", 960, "900"}, {"59m30s", 3600, "3570"}, {"1h", 3600, "3599"}} {
		t.Run(cmp.Or(tc.expires, "the default"), func(t *testing.T) {
			w.AssumeRoles = nil
			args := []string{"upload-url", "hooli", "a.csv", "--role"}
			if tc.expires != "" {
				args = append(args, "--expires", tc.expires)
			}
			code, stdout, stderr := runIn(t, w, args...)
			if code != 0 {
				t.Fatalf("got exit %d, %s", code, stderr)
			}
			u, headers, _ := presigned(t, stdout)
			q := u.Query()
			if headers["If-None-Match"] != "*" {
				t.Errorf("got headers %v, want If-None-Match: *", headers)
			}
			if got := q.Get("X-Amz-Expires"); got != tc.wantURL {
				t.Errorf("got X-Amz-Expires %s, want %s", got, tc.wantURL)
			}
			if !strings.HasPrefix(q.Get("X-Amz-Credential"), "ASIASESSION1/") || q.Get("X-Amz-Security-Token") != "session-token" {
				t.Errorf("got credential %q, token %q; want the uploader session's", q.Get("X-Amz-Credential"), q.Get("X-Amz-Security-Token"))
			}
			if len(w.AssumeRoles) != 1 {
				t.Fatalf("got %d AssumeRole calls, want 1", len(w.AssumeRoles))
			}
			in := w.AssumeRoles[0]
			if aws.ToString(in.RoleArn) != "arn:aws:iam::123456789012:role/shared-uploader" || aws.ToInt32(in.DurationSeconds) != tc.wantSeconds {
				t.Errorf("got role %s for %ds, want the pool's uploader role for %ds", aws.ToString(in.RoleArn), aws.ToInt32(in.DurationSeconds), tc.wantSeconds)
			}
			if len(in.Tags) != 1 || aws.ToString(in.Tags[0].Key) != "tenant" || aws.ToString(in.Tags[0].Value) != "hooli" {
				t.Errorf("got tags %+v, want exactly tenant=hooli", in.Tags)
			}
		})
	}
}

// Bad input is a clear error and writes nothing (no PUT, no session).
func TestUploadURLRefused(t *testing.T) {
	session := aws.Credentials{AccessKeyID: "ASIAOPERATOR", SecretAccessKey: "s", SessionToken: "t", CanExpire: true, Expires: now.Add(30 * time.Minute)}
	for _, tc := range []struct {
		name     string
		args     []string
		creds    *aws.Credentials
		uploader bool
		wantCode int
		want     string
	}{
		{"unknown tenant", []string{"nobody", "a.csv"}, nil, false, 1, `tenant "nobody" not found`},
		{"up and out", []string{"acme", "../globex/a.csv"}, nil, false, 2, `has a ".." segment`},
		{"a leading slash", []string{"acme", "/a.csv"}, nil, false, 2, `starts with "/"`},
		{"a control character", []string{"acme", "a\tb.csv"}, nil, false, 2, "control character U+0009"},
		{"outside the safe set", []string{"acme", "a#b.csv"}, nil, false, 2, `contains "#"`},
		{"past 7 days", []string{"acme", "a.csv", "--expires", "169h"}, nil, false, 2, "past S3's limit of 7 days"},
		{"past 7 days, allowed long", []string{"acme", "a.csv", "--expires", "169h", "--allow-long"}, nil, false, 2, "past S3's limit of 7 days"},
		{"over an hour", []string{"acme", "a.csv", "--expires", "61m"}, nil, false, 2, "is over 1h: a presigned URL is a bearer token"},
		{"allowed long, past the operator's session", []string{"acme", "a.csv", "--expires", "2h", "--allow-long"}, &session, false, 1, "outlives the temporary credentials"},
		{"a size over --max-bytes", []string{"acme", "a.csv", "--bytes", "4097", "--max-bytes", "4096"}, nil, false, 2, "--bytes 4097 is over --max-bytes 4096"},
		{"a size over one PUT's", []string{"acme", "a.csv", "--bytes", "5368709121"}, nil, false, 2, "--bytes 5368709121 is over --max-bytes 5368709120"},
		{"--max-bytes over one PUT's", []string{"acme", "a.csv", "--max-bytes", "5368709121"}, nil, false, 2, "--max-bytes 5368709121 is out of range"},
		{"--max-bytes 0", []string{"acme", "a.csv", "--max-bytes", "0", "--bytes", "1"}, nil, false, 2, "--max-bytes 0 is out of range"},
		{"an empty size", []string{"acme", "a.csv", "--bytes", "0"}, nil, false, 2, "signs no Content-Length of 0"},
		{"a negative size", []string{"acme", "a.csv", "--bytes", "-1"}, nil, false, 2, "--bytes -1 is negative"},
		{"a size that is not a number", []string{"acme", "a.csv", "--bytes", "2k"}, nil, false, 2, "not a whole number of bytes"},
		{"the bucket's encryption unknown", []string{"acme", "a.csv"}, nil, false, 1, "s3:GetEncryptionConfiguration"},
		{"not a duration", []string{"acme", "a.csv", "--expires", "tomorrow"}, nil, false, 2, `invalid value "tomorrow" for flag -expires`},
		{"past the operator's session", []string{"acme", "a.csv", "--expires", "1h"}, &session, false, 1, "outlives the temporary credentials"},
		{"a silo tenant's role", []string{"acme", "a.csv", "--role"}, nil, true, 1, "tenant acme is a silo tenant"},
		{"a pool without uploaders", []string{"hooli", "a.csv", "--role"}, nil, false, 1, "pool shared has no uploader role; set uploaders on the pool"},
		{"past a role session's limit", []string{"hooli", "a.csv", "--role", "--expires", "61m"}, nil, true, 2, "a session of the uploader role lasts at most 1h"},
		{"past a role session's limit, allowed long", []string{"hooli", "a.csv", "--role", "--expires", "61m", "--allow-long"}, nil, true, 2, "a session of the uploader role lasts at most 1h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := pooledWorld()
			if tc.creds != nil {
				w.Creds = *tc.creds
			}
			if tc.uploader {
				w.SetUploaderRole("shared", "arn:aws:iam::123456789012:role/shared-uploader")
			}
			if tc.name == "the bucket's encryption unknown" {
				w.Err["GetBucketEncryption"] = errors.New("AccessDenied: Access Denied")
			}
			code, stdout, stderr := runIn(t, w, append([]string{"upload-url"}, tc.args...)...)
			if code != tc.wantCode || !strings.Contains(stderr, tc.want) {
				t.Errorf("got exit %d, stderr %q; want %d and %q", code, stderr, tc.wantCode, tc.want)
			}
			if stdout != "" || len(w.Puts) != 0 || len(w.AssumeRoles) != 0 {
				t.Errorf("got stdout %q, %d puts, %d AssumeRole calls; want nothing", stdout, len(w.Puts), len(w.AssumeRoles))
			}
		})
	}
}

func writeFiles(t *testing.T, names ...string) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte("id,name\n1,"+n+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// upload puts the files in the order given, one PUT after the other, each under the tenant's
// prefix with its base name as typed, and prints each key and version as it goes.
func TestUpload(t *testing.T) {
	w := world()
	files := writeFiles(t, "z last name.csv", "a 受注.csv", "m.csv")
	code, stdout, stderr := runIn(t, w, append([]string{"upload", "acme"}, files...)...)
	if code != 0 {
		t.Fatalf("got exit %d, %s", code, stderr)
	}
	var keys []string
	for _, p := range w.Puts {
		keys = append(keys, aws.ToString(p.Key))
		if aws.ToString(p.IfNoneMatch) != "*" {
			t.Errorf("got If-None-Match %q on %s, want *: an upload never overwrites", aws.ToString(p.IfNoneMatch), aws.ToString(p.Key))
		}
	}
	if want := []string{"inbox/acme/z last name.csv", "inbox/acme/a 受注.csv", "inbox/acme/m.csv"}; !slices.Equal(keys, want) {
		t.Errorf("got puts %q, want %q in that order", keys, want)
	}
	want := "uploaded 'inbox/acme/z last name.csv' (version v1, 26 bytes)\n" +
		"uploaded 'inbox/acme/a 受注.csv' (version v2, 23 bytes)\n" +
		"uploaded inbox/acme/m.csv (version v3, 16 bytes)\n"
	if stdout != want {
		t.Errorf("got\n%s\nwant\n%s", stdout, want)
	}
	if body, _ := w.Body("ingest", "inbox/acme/m.csv"); body != "id,name\n1,m.csv\n" {
		t.Errorf("got body %q, want the file's", body)
	}
}

func TestUploadJSONAndName(t *testing.T) {
	w := world()
	files := writeFiles(t, "local.csv")
	code, stdout, stderr := runIn(t, w, "upload", "acme", files[0], "--name", "2026/11/orders.csv", "--json")
	if code != 0 {
		t.Fatalf("got exit %d, %s", code, stderr)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if len(got) != 1 || got[0]["key"] != "inbox/acme/2026/11/orders.csv" || got[0]["versionId"] != "v1" || got[0]["bucket"] != "ingest" {
		t.Errorf("got %v, want one upload to inbox/acme/2026/11/orders.csv version v1", got)
	}
}

// Every file and name is checked before the first PUT: one bad one uploads nothing.
func TestUploadRefusedWritesNothing(t *testing.T) {
	ok := writeFiles(t, "a.csv", "b.csv")
	bad := writeFiles(t, "c#1.csv")
	other := writeFiles(t, "a.csv")
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"unknown tenant", []string{"nobody", ok[0]}, 1, `tenant "nobody" not found`},
		{"a missing file last", []string{"acme", ok[0], ok[1], filepath.Join(filepath.Dir(ok[0]), "missing.csv")}, 1, "missing.csv: no such file"},
		{"a bad base name", []string{"acme", ok[0], bad[0]}, 1, `contains "#"`},
		{"two files, one key", []string{"acme", ok[0], other[0]}, 1, "would both be inbox/acme/a.csv"},
		{"a folder", []string{"acme", ok[0], filepath.Dir(ok[0])}, 1, "is not a regular file"},
		{"--name for two files", []string{"acme", ok[0], ok[1], "--name", "x.csv"}, 2, "--name names one file, got 2"},
		{"--name up and out", []string{"acme", ok[0], "--name", "../globex/x.csv"}, 2, `has a ".." segment`},
		// The world holds inbox/acme/a.csv: S3 answers If-None-Match: * with 412.
		{"a name that exists", []string{"acme", ok[0]}, 1, "s3://ingest/inbox/acme/a.csv already exists (S3 answered 412 PreconditionFailed to If-None-Match: *)"},
		{"a name that exists, by --name", []string{"acme", ok[1], "--name", "a.csv"}, 1, "choose another name (--name)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := world()
			code, stdout, stderr := runIn(t, w, append([]string{"upload"}, tc.args...)...)
			if code != tc.wantCode || !strings.Contains(stderr, tc.want) {
				t.Errorf("got exit %d, stderr %q; want %d and %q", code, stderr, tc.wantCode, tc.want)
			}
			if stdout != "" || len(w.Puts) != 0 {
				t.Errorf("got stdout %q and %d puts, want nothing", stdout, len(w.Puts))
			}
		})
	}
}

// A failure midway says what arrived and what did not; the files before it stay.
func TestUploadFailureMidway(t *testing.T) {
	w := world()
	files := writeFiles(t, "p.csv", "q.csv", "r.csv")
	newOps := func(_ context.Context, prefix string) (*ops.Ops, error) {
		c := w.Clients()
		c.S3 = &failingPut{S3: c.S3, at: 2}
		o := ops.New(c, prefix)
		o.Now = func() time.Time { return now }
		return o, nil
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"upload", "acme"}, files...), &out, &errOut, newOps)
	if code != 1 {
		t.Errorf("got exit %d, want 1", code)
	}
	if want := "uploaded inbox/acme/p.csv (version v1, 16 bytes)\n"; out.String() != want {
		t.Errorf("got stdout %q, want %q", out.String(), want)
	}
	if want := "1 of 3 files uploaded before it, not uploaded: " + files[1] + ", " + files[2]; !strings.Contains(errOut.String(), want) {
		t.Errorf("got stderr %q, want it to contain %q", errOut.String(), want)
	}
	if len(w.Puts) != 1 {
		t.Errorf("got %d puts, want 1", len(w.Puts))
	}
}

// failingPut fails the at-th PutObject.
type failingPut struct {
	ops.S3
	at, n int
}

func (f *failingPut) PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if f.n++; f.n == f.at {
		return nil, errors.New("InternalError: we encountered an internal error")
	}
	return f.S3.PutObject(ctx, in, optFns...)
}

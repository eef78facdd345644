package deploy

import "testing"

func TestContentKey(t *testing.T) {
	base := ContentKey("/m", []byte(`{"tenants": [{"id": "a", "chunkSize": 10}, {"id": "b"}]}`), map[string]string{"k": "v"})
	for _, tc := range []struct {
		name, json string
		extra      map[string]string
		same       bool
	}{
		{"reindented", "{\n  \"tenants\": [\n    {\"id\": \"a\", \"chunkSize\": 10},\n    {\"id\": \"b\"}\n  ]\n}\n", map[string]string{"k": "v"}, true},
		{"keys reordered", `{"tenants":[{"chunkSize":10,"id":"a"},{"id":"b"}]}`, map[string]string{"k": "v"}, true},
		{"tenants reordered", `{"tenants":[{"id":"b"},{"id":"a","chunkSize":10}]}`, map[string]string{"k": "v"}, false},
		{"value changed", `{"tenants":[{"id":"a","chunkSize":11},{"id":"b"}]}`, map[string]string{"k": "v"}, false},
		{"number written differently", `{"tenants":[{"id":"a","chunkSize":1e1},{"id":"b"}]}`, map[string]string{"k": "v"}, false},
		{"other context", `{"tenants":[{"id":"a","chunkSize":10},{"id":"b"}]}`, map[string]string{"k": "w"}, false},
		{"no context", `{"tenants":[{"id":"a","chunkSize":10},{"id":"b"}]}`, nil, false},
		{"not JSON", `{"tenants":[`, map[string]string{"k": "v"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ContentKey("/m", []byte(tc.json), tc.extra) == base; got != tc.same {
				t.Errorf("same key as the base app: got %v, want %v", got, tc.same)
			}
		})
	}
}

func TestContentKeyOfAnotherModule(t *testing.T) {
	app := []byte(`{"tenants":[{"id":"a"}]}`)
	if ContentKey("/m", app, nil) == ContentKey("/n", app, nil) {
		t.Error("two modules' apps share a key")
	}
}

// A field written with its default value is the same app as the field left out: the key is the
// file as the app's parser reads it.
func TestContentKeyOfDefaults(t *testing.T) {
	const url = `"registerUrl": "https://core.example.com/records"`
	key := func(tenant string) string {
		return ContentKey("/m", []byte(`{"tenants": [{"id": "a", `+url+tenant+`}]}`), nil)
	}
	if key(`, "onInvalidRecord": "failFile"`) != key(``) {
		t.Error("the default onInvalidRecord written out: got another key, want the same app")
	}
	if key(`, "onInvalidRecord": "skipRecord"`) == key(``) {
		t.Error("onInvalidRecord skipRecord: got the key of the default, want another app")
	}
}

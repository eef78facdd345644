package localrun

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// codePath is where the control plane serves the functions' code, under Code.Location.
const codePath = "/local-code/"

// serveGetFunction answers GET /2015-03-31/functions/{name}; false if the request is not one.
// GetFunction (https://docs.aws.amazon.com/lambda/latest/api/API_GetFunction.html) answers for a
// local function with its configuration and a Code.Location that the control plane itself serves
// (codePath): a zip of the function's code asset directory, made on request, as Lambda's presigned
// URL of the deployment package. pipectl reads a pool's tenants from it (pool-tenants.json).
func (c *Cloud) serveGetFunction(w http.ResponseWriter, req *http.Request) bool {
	const prefix = "/2015-03-31/functions/"
	name, ok := strings.CutPrefix(req.URL.Path, prefix)
	if req.Method != http.MethodGet || !ok || name == "" || strings.Contains(strings.TrimSuffix(name, "/"), "/") {
		return false
	}
	name = strings.TrimSuffix(name, "/")
	if u, err := url.PathUnescape(name); err == nil {
		name = u
	}
	f := c.Lambda.Lookup(name)
	w.Header().Set("Content-Type", "application/json")
	if f == nil {
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]string{"Type": "User", "Message": "Function not found: " + name})
		return true
	}
	code := map[string]any{"RepositoryType": "S3"}
	if f.AssetDir != "" {
		code["Location"] = "http://" + req.Host + codePath + url.PathEscape(f.Name) + ".zip"
	}
	// The environment as Lambda returns it: pipectl reads the controllers' admission tables from it.
	vars := map[string]string{}
	for _, kv := range f.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	json.NewEncoder(w).Encode(map[string]any{
		"Configuration": map[string]any{"FunctionName": f.Name, "FunctionArn": f.ARN, "Runtime": "provided.al2023", "Handler": "bootstrap",
			"Environment": map[string]any{"Variables": vars}},
		"Code": code,
	})
	return true
}

// serveCode answers GET /local-code/{name}.zip with a zip of the function's asset directory, its
// files stored uncompressed.
func (c *Cloud) serveCode(w http.ResponseWriter, req *http.Request) {
	name, _ := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(req.URL.Path, codePath), ".zip"))
	f := c.Lambda.Lookup(name)
	if f == nil || f.AssetDir == "" {
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/zip")
	zw := zip.NewWriter(w)
	err := filepath.WalkDir(f.AssetDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(f.AssetDir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// Stored, not deflated: the asset holds the function's binary, and deflating it at each
		// request was a fifth of the harness's CPU over the scenarios. A reader of Lambda's
		// deployment package takes either method.
		out, err := zw.CreateHeader(&zip.FileHeader{Name: filepath.ToSlash(rel), Method: zip.Store})
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	})
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		// The status is sent; a truncated zip fails the reader's check.
		fmt.Fprintf(c.logs, "lambda: code of %s: %v\n", f.Name, err)
	}
}

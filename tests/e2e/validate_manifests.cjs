// Validates Kubernetes manifests against the API's JSON schema (kubernetes-models, from the
// Kubernetes OpenAPI spec): node validate_manifests.cjs FILE...; prints a JSON list of
// {file, kind, name, error} (error null when valid). An unknown kind is an error.
"use strict";
const fs = require("fs");
const YAML = require("yaml");

const groups = {
  "v1": "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "batch/v1": "kubernetes-models/batch/v1",
  "rbac.authorization.k8s.io/v1": "kubernetes-models/rbac.authorization.k8s.io/v1",
};

const out = [];
for (const file of process.argv.slice(2)) {
  for (const doc of YAML.parseAllDocuments(fs.readFileSync(file, "utf8"))) {
    if (doc.errors.length) {
      out.push({ file, kind: null, name: null, error: String(doc.errors[0]) });
      continue;
    }
    const obj = doc.toJSON();
    if (obj === null)
      continue;
    const entry = { file, kind: obj.kind, name: obj.metadata && obj.metadata.name, error: null };
    try {
      const mod = groups[obj.apiVersion] && require(groups[obj.apiVersion]);
      const Model = mod && mod[obj.kind];
      if (!Model)
        throw new Error(`unknown apiVersion/kind ${obj.apiVersion}/${obj.kind}`);
      new Model(obj).validate();
    } catch (e) {
      entry.error = String(e.message || e);
    }
    out.push(entry);
  }
}
console.log(JSON.stringify(out));

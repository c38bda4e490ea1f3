// Validates Kubernetes objects with kubernetes-models (npm: Kubernetes' API
// types as validators, generated from the API server's OpenAPI).
//
//   node kubernetes_models_check.mjs <node-tools dir> <objects.json>
//
// objects.json: an array of Deployment (apps/v1), Service and Secret (v1)
// objects. Prints each error ("<kind> <name>: <error>"); exits 1 on any.
import {readFileSync} from "node:fs";
import {join} from "node:path";
import {pathToFileURL} from "node:url";

const [tools, file] = process.argv.slice(2);
// The package exports ES modules only ("import"): loaded by their paths.
const models = join(tools, "node_modules", "kubernetes-models");
const types = {
  "apps/v1/Deployment": join(models, "apps", "v1", "Deployment.js"),
  "v1/Service": join(models, "v1", "Service.js"),
  "v1/Secret": join(models, "v1", "Secret.js"),
};
let errors = 0;
for (const object of JSON.parse(readFileSync(file, "utf8"))) {
  const key = `${object.apiVersion}/${object.kind}`;
  const where = `${object.kind} ${object.metadata?.name}`;
  if (!types[key]) {
    console.log(`${where}: no validator for ${key}`);
    ++errors;
    continue;
  }
  const module = await import(pathToFileURL(types[key]).href);
  const Type = module[object.kind];
  try {
    new Type(object).validate();
  } catch (e) {
    console.log(`${where}: ${e.message}`);
    ++errors;
  }
}
process.exitCode = errors > 0 ? 1 : 0;

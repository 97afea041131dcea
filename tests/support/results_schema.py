"""results.json against its JSON Schema (services/theval_mesh/data/results.schema.json)."""
import json

import jsonschema

from theval_mesh.outputs.results_files import RESULTS_SCHEMA


def validate_results(document: dict):
    schema = json.loads(RESULTS_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(document)

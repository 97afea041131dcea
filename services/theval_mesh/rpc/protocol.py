"""Names on the wire that are not in the .proto files: the trailing metadata both sides read."""

# The failed VideoResult (serialized) of a video the evaluator could not score: the caller learns
# the reason and what was measured before the failure.
RESULT_TRAILER = "theval-result-bin"
# A refusal because the server was full: the request was not at fault, a retry may succeed.
BUSY = "theval-busy"

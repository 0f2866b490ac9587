"""Amazon Bedrock's Converse and ConverseStream APIs natively: the request (`request`), the reply (`reply`) over the
AWS event stream's framing (`eventstream`), the backend (`model`, `BedrockModel`, registered as model_type
'bedrock', signing with SigV4)."""

"""Text in: codecs (GPT-2 BPE, compact vocabularies), corpora, the token store, the training stream."""

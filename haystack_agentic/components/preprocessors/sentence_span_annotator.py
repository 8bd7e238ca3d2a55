# SPDX-License-Identifier: Apache-2.0

import dataclasses

from haystack import Document, component, logging

from haystack_agentic.grounding.sentence_splitter import SENTENCE_SPANS_KEY, sentence_spans

logger = logging.getLogger(__name__)


@component
class SentenceSpanAnnotator:
    """
    Stores each chunk's sentence boundaries in its metadata (`meta["sentence_spans"]`).

    Stores each chunk's sentence boundaries in its metadata (`meta["sentence_spans"]`, flat `[start, end, ...]`
    character offsets), so that citations read them instead of splitting the chunk at every question: put it
    after the splitter (and `ChunkMetadataCleaner`), before the embedder/writer.

    The boundaries are those of `split_sentences` (pysbd's English rules, else a punctuation splitter), computed
    once per chunk at index time. Ids are kept: the spans follow from the content.

    ### Usage example
    ```python
    from haystack import Document
    from haystack_agentic.components.preprocessors.sentence_span_annotator import SentenceSpanAnnotator

    chunk = Document(content="Paris is in France. It is big.")
    print(SentenceSpanAnnotator().run(documents=[chunk])["documents"][0].meta)  # {'sentence_spans': [0, 19, 20, 30]}
    ```
    """

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """
        Set the sentence spans of each chunk with text (spans it had are replaced; a chunk without text is passed on).

        :param documents: The chunks.
        :returns: `{"documents": list[Document]}`: new Documents with the same ids (the input is not changed).
        """
        annotated = []
        for doc in documents:
            if doc.content is None:
                annotated.append(doc)
                continue
            spans = sentence_spans(doc.content)
            annotated.append(dataclasses.replace(doc, meta={**(doc.meta or {}), SENTENCE_SPANS_KEY: spans}))
        return {"documents": annotated}

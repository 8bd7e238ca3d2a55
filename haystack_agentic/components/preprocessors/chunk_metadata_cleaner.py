# SPDX-License-Identifier: Apache-2.0

from haystack import Document, component, logging

logger = logging.getLogger(__name__)

#: Metadata keys dropped by default: `DocumentSplitter`'s `_split_overlap` is a list of dicts, which vector
#: databases such as Milvus cannot store as a scalar field.
DEFAULT_KEYS = ("_split_overlap",)


@component
class ChunkMetadataCleaner:
    """
    Drops metadata a document store cannot hold and gives each chunk a content-hash id.

    Drops metadata keys that a document store cannot hold, and gives each chunk a new id (Haystack's content hash
    of the cleaned chunk, so indexing again overwrites): put it between a splitter and an embedder/writer.

    ### Usage example
    ```python
    from haystack import Document
    from haystack_agentic.components.preprocessors.chunk_metadata_cleaner import ChunkMetadataCleaner

    chunk = Document(content="text", meta={"title": "t", "_split_overlap": [{"doc_id": "x", "range": [0, 3]}]})
    print(ChunkMetadataCleaner().run(documents=[chunk])["documents"][0].meta)  # {'title': 't'}
    ```
    """

    def __init__(self, keys: list[str] | None = None) -> None:
        """:param keys: Metadata keys to drop (default: `["_split_overlap"]`)."""
        self.keys = list(keys) if keys is not None else list(DEFAULT_KEYS)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """
        Clean the chunks' metadata; chunks with no text are dropped.

        :param documents: The chunks.
        :returns: `{"documents": list[Document]}`: new Documents (the input is not changed).
        """
        cleaned = []
        for doc in documents:
            if not doc.content or not doc.content.strip():
                continue
            meta = {k: v for k, v in (doc.meta or {}).items() if k not in self.keys}
            cleaned.append(Document(content=doc.content, meta=meta))
        return {"documents": cleaned}

# SPDX-License-Identifier: Apache-2.0

from haystack import Document, component, logging
from haystack.document_stores.types import DocumentStore, DuplicatePolicy

from haystack_agentic.document_stores import document_counts
from haystack_agentic.indexing.source_sync import SOURCE_FIELD, document_sources, remove_stale_chunks

logger = logging.getLogger(__name__)


@component
class SourceReplacingDocumentWriter:
    """
    Writes chunks so that each source file's chunks replace the ones it had before.

    Writes chunks into a document store so that each source file's chunks replace the ones it had before: upserted
    by id first, then the store's other chunks of their sources are deleted (a failure leaves stale chunks at worst).

    ### Usage example
    ```python
    from haystack import Document
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack_agentic.components.writers.source_replacing_document_writer import SourceReplacingDocumentWriter

    store = InMemoryDocumentStore()
    writer = SourceReplacingDocumentWriter(document_store=store)
    writer.run(documents=[Document(content="old text", meta={"file_path": "/docs/a.txt"})])
    print(writer.run(documents=[Document(content="new text", meta={"file_path": "/docs/a.txt"})]))
    # {'documents_written': 1, 'documents_removed': 1}
    ```
    """

    def __init__(self, document_store: DocumentStore, source_field: str = SOURCE_FIELD) -> None:
        """
        Create a SourceReplacingDocumentWriter.

        :param document_store: The store to write to.
        :param source_field: The metadata key that names a chunk's source. Default `file_path`.
        """
        self.document_store = document_store
        self.source_field = source_field

    @component.output_types(documents_written=int, documents_removed=int)
    def run(self, documents: list[Document], sources: list[str] | None = None) -> dict[str, int]:
        """
        Upsert the chunks, then delete the earlier chunks of their sources.

        :param documents: The chunks (chunks without a source are only upserted).
        :param sources: More sources to replace, e.g. files that gave no chunk this time (emptied): all their
            chunks are deleted. Default: none.
        :returns: `{"documents_written": int, "documents_removed": int}`: chunks written, stale chunks deleted.
        :raises Exception: Whatever the store raises on a write or delete (nothing is deleted if the write fails).
        """
        document_counts.begin_write(self.document_store)
        written = self.document_store.write_documents(documents, policy=DuplicatePolicy.OVERWRITE) if documents else 0
        replaced = [*document_sources(documents, self.source_field), *(sources or [])]
        removed = remove_stale_chunks(self.document_store, replaced, [d.id for d in documents], self.source_field)
        document_counts.record_document_count(self.document_store)
        return {"documents_written": written, "documents_removed": removed}

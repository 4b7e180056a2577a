/**
 * The dataset routes the knowledge pages call (`/v1/datasets/...`), typed from the
 * generated OpenAPI types. Errors are {@link ApiError}s with the server's message; an
 * upload none of whose files was kept is an ApiError whose `problems` hold each file's
 * outcome (see documents.ts `uploadOutcomes`).
 */
import { request } from '../api/client';
import type { components } from '../api/schema';

type S = components['schemas'];
export type Dataset = S['DatasetOut'];
export type DatasetCreated = S['DatasetCreated'];
export type DatasetCreate = S['DatasetCreate'];
export type DatasetUpdate = S['DatasetUpdate'];
export type ChunkingSettings = S['ChunkingSettings'];
export type DocumentOut = S['DocumentOut'];
export type DocumentUploadResult = S['DocumentUploadResult'];
export type DocumentUploadItem = S['DocumentUploadItem'];
export type ChunkPage = S['ChunkPage'];
export type DatasetSearch = S['DatasetSearch'];
export type DatasetSearchResult = S['DatasetSearchResult'];
export type SearchHit = S['SearchHit'];
export type SearchMode = S['SearchMode'];
export type DocumentStatus = S['DocumentStatus'];

const ds = (id: string) => `/v1/datasets/${encodeURIComponent(id)}`;
const doc = (id: string, documentId: string) => `${ds(id)}/documents/${encodeURIComponent(documentId)}`;

export const kbApi = {
  list: () => request<S['DatasetList']>('GET', '/v1/datasets'),
  get: (id: string) => request<Dataset>('GET', ds(id)),
  create: (body: DatasetCreate) => request<DatasetCreated>('POST', '/v1/datasets', { body }),
  /** Only the fields given change. */
  update: (id: string, body: Partial<DatasetUpdate>) => request<Dataset>('PATCH', ds(id), { body }),
  remove: (id: string) => request<void>('DELETE', ds(id)),
  documents: (id: string) => request<S['DocumentList']>('GET', `${ds(id)}/documents`),
  /** Sends the files in one multipart request (field `files`, repeated). */
  upload: (id: string, files: File[]) => {
    const form = new FormData();
    for (const f of files) form.append('files', f, f.name);
    return request<DocumentUploadResult>('POST', `${ds(id)}/documents`, { form });
  },
  addText: (id: string, name: string, text: string) =>
    request<DocumentUploadResult>('POST', `${ds(id)}/documents`, { body: { name, text } }),
  removeDocument: (id: string, documentId: string) => request<void>('DELETE', doc(id, documentId)),
  reindex: (id: string, documentId: string) => request<DocumentOut>('POST', `${doc(id, documentId)}/reindex`),
  chunks: (id: string, documentId: string, offset: number, limit: number) =>
    request<ChunkPage>('GET', `${doc(id, documentId)}/chunks`, { query: { offset, limit } }),
  /** Hit testing; options left out take the server's defaults. */
  search: (id: string, body: Partial<DatasetSearch>) => request<DatasetSearchResult>('POST', `${ds(id)}/search`, { body }),
};

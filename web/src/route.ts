/** The address: `#/w/<id>` opens a workflow, `#/knowledge[/<id>]` the Knowledge section,
 * anything else the workflow list. */
import { useSyncExternalStore } from 'react';

function subscribeHash(cb: () => void): () => void {
  window.addEventListener('hashchange', cb);
  return () => window.removeEventListener('hashchange', cb);
}

/** The workflow id in `#/w/<id>`, or null. */
export function useRoute(): string | null {
  const hash = useSyncExternalStore(subscribeHash, () => window.location.hash);
  const m = hash.match(/^#\/w\/(.+)$/);
  return m ? decodeURIComponent(m[1]) : null;
}

/** Opens a workflow (or the list with null). */
export function navigate(workflowId: string | null): void {
  window.location.hash = workflowId ? `/w/${encodeURIComponent(workflowId)}` : '/';
}

/** The Knowledge section: `#/knowledge` (the datasets, null) or `#/knowledge/<id>`
 * (one dataset, its id); undefined for any other address. */
export function useKnowledgeRoute(): string | null | undefined {
  const hash = useSyncExternalStore(subscribeHash, () => window.location.hash);
  return knowledgeRoute(hash);
}

/** {@link useKnowledgeRoute} of an address's hash. */
export function knowledgeRoute(hash: string): string | null | undefined {
  const m = hash.match(/^#\/knowledge(?:\/(.+))?$/);
  if (!m) return undefined;
  return m[1] ? decodeURIComponent(m[1]) : null;
}

/** The address of the datasets (no id) or of one dataset. */
export function knowledgeHref(datasetId?: string): string {
  return datasetId ? `#/knowledge/${encodeURIComponent(datasetId)}` : '#/knowledge';
}

/** Opens a dataset's page (or the datasets with null). */
export function openDataset(datasetId: string | null): void {
  window.location.hash = knowledgeHref(datasetId ?? undefined).slice(1);
}
/** True on the "Model providers" page (`#/providers`). */
export function useProvidersRoute(): boolean {
  const hash = useSyncExternalStore(subscribeHash, () => window.location.hash);
  return hash === PROVIDERS_HASH;
}

/** The address of the "Model providers" page. */
export const PROVIDERS_HASH = '#/providers';

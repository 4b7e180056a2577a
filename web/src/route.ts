/** The address: `#/w/<id>` opens a workflow, anything else the workflow list. */
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

/** True on the "Model providers" page (`#/providers`). */
export function useProvidersRoute(): boolean {
  const hash = useSyncExternalStore(subscribeHash, () => window.location.hash);
  return hash === PROVIDERS_HASH;
}

/** The address of the "Model providers" page. */
export const PROVIDERS_HASH = '#/providers';

/**
 * The node catalog of the server (GET /v1/node-kinds), loaded once: the palette, the
 * config forms, the handles and the container kinds all read it from here.
 */
import { create } from 'zustand';
import { api, ApiError } from '../api/client';
import type { NodeKind } from '../api/types';

interface CatalogState {
  kinds: NodeKind[];
  byKind: Record<string, NodeKind>;
  containers: Set<string>;
  status: 'idle' | 'loading' | 'ready' | 'error';
  error: string | null;
  /** HTTP status of the failed load (401: the key was refused). */
  errorStatus: number | null;
  load: () => Promise<void>;
  setKinds: (kinds: NodeKind[]) => void;
}

export const useCatalog = create<CatalogState>((set, get) => ({
  kinds: [],
  byKind: {},
  containers: new Set(),
  status: 'idle',
  error: null,
  errorStatus: null,
  setKinds: (kinds) => set({
    kinds,
    byKind: Object.fromEntries(kinds.map((k) => [k.kind, k])),
    containers: new Set(kinds.filter((k) => k.traits?.container).map((k) => k.kind)),
    status: 'ready',
    error: null,
    errorStatus: null,
  }),
  load: async () => {
    if (get().status === 'loading') return;
    set({ status: 'loading', error: null });
    try {
      get().setKinds((await api.nodeKinds()).kinds);
    } catch (e) {
      set({ status: 'error', error: (e as Error).message, errorStatus: e instanceof ApiError ? e.status : null });
    }
  },
}));

/** The catalog entry of `kind` (undefined for a kind the server does not know). */
export function useKind(kind: string): NodeKind | undefined {
  return useCatalog((s) => s.byKind[kind]);
}

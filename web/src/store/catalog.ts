/**
 * The node catalog of the server (GET /v1/node-kinds), loaded once: the palette, the
 * config forms, the handles and the container kinds all read it from here.
 */
import { create } from 'zustand';
import { api, ApiError } from '../api/client';
import type { NodeKind, NodeKindList } from '../api/types';
import type { JSONSchema } from '../lib/schema';

interface CatalogState {
  kinds: NodeKind[];
  /** The model registry's names (what `model` fields accept). */
  models: string[];
  /** The registry's embedding models (what a dataset's embedding model may be). */
  embeddingModels: string[];
  /** `sys` names a reference may read -> type name. */
  systemVariables: Record<string, string>;
  /** JSON Schema of the fields every node has besides its config (execution policy...). */
  nodeFieldsSchema: JSONSchema;
  /** Language tag -> title of each field of `nodeFieldsSchema` (English: the schema's own). */
  nodeFieldLabels: Record<string, Record<string, string>>;
  /** Per language, the help of the fields every node has (English help -> help). */
  nodeFieldHelp: Record<string, Record<string, string>>;
  /** Language tag -> label of each enum value of `nodeFieldsSchema` (English: the value). */
  nodeValueLabels: Record<string, Record<string, string>>;
  byKind: Record<string, NodeKind>;
  containers: Set<string>;
  status: 'idle' | 'loading' | 'ready' | 'error';
  error: string | null;
  /** HTTP status of the failed load (401: the key was refused). */
  errorStatus: number | null;
  load: () => Promise<void>;
  setKinds: (kinds: NodeKind[], extra?: Omit<NodeKindList, 'kinds'>) => void;
}

export const useCatalog = create<CatalogState>((set, get) => ({
  kinds: [],
  models: [],
  embeddingModels: [],
  systemVariables: {},
  nodeFieldsSchema: {},
  nodeFieldLabels: {},
  nodeFieldHelp: {},
  nodeValueLabels: {},
  byKind: {},
  containers: new Set(),
  status: 'idle',
  error: null,
  errorStatus: null,
  setKinds: (kinds, extra = {}) => set({
    kinds,
    models: extra.models ?? [],
    embeddingModels: extra.embedding_models ?? [],
    systemVariables: extra.system_variables ?? {},
    nodeFieldsSchema: (extra.node_fields_schema ?? {}) as JSONSchema,
    nodeFieldLabels: extra.node_field_labels ?? {},
    nodeFieldHelp: extra.node_field_help ?? {},
    nodeValueLabels: extra.node_value_labels ?? {},
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
      const { kinds, ...extra } = await api.nodeKinds();
      get().setKinds(kinds, extra);
    } catch (e) {
      set({ status: 'error', error: (e as Error).message, errorStatus: e instanceof ApiError ? e.status : null });
    }
  },
}));

/** The catalog entry of `kind` (undefined for a kind the server does not know). */
export function useKind(kind: string): NodeKind | undefined {
  return useCatalog((s) => s.byKind[kind]);
}

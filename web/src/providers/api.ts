/**
 * The tenant's model providers (`/v1/model-providers`): endpoints, their models and the
 * default models. A key only ever goes to the server (create, replace); answers carry
 * `api_key_set` and a masked form, never the key.
 */
import { request } from '../api/client';
import type { components } from '../api/schema';

type S = components['schemas'];
export type Preset = S['PresetInfo'];
export type Provider = S['ProviderOut'];
export type ProviderModel = S['ProviderModelOut'];
export type ModelDefaults = S['ModelDefaults'];
export type UpstreamModel = S['UpstreamModel'];
export type ProbeOutcome = S['ProbeOutcome'];
export type ModelType = ProviderModel['type'];
export type ModelCapabilities = S['ModelCapabilities'];
export type ModelOverride = S['ModelOverride'];

const base = '/v1/model-providers';
const one = (id: string) => `${base}/${encodeURIComponent(id)}`;
// model names may hold "/" (org/model): each segment is encoded, the slashes kept
const model = (id: string, name: string) => `${one(id)}/models/${name.split('/').map(encodeURIComponent).join('/')}`;

const capabilities = (name: string) => `/v1/model-capabilities/${name.split('/').map(encodeURIComponent).join('/')}`;

export const providersApi = {
  presets: () => request<S['PresetList']>('GET', `${base}/presets`),
  list: () => request<S['ProviderList']>('GET', base),
  create: (body: S['ProviderCreate']) => request<Provider>('POST', base, { body }),
  update: (id: string, body: S['ProviderUpdate']) => request<Provider>('PATCH', one(id), { body }),
  remove: (id: string) => request<void>('DELETE', one(id)),
  upstream: (id: string) => request<S['UpstreamModels']>('GET', `${one(id)}/upstream-models`),
  addModel: (id: string, body: S['ProviderModelIn']) => request<ProviderModel>('POST', `${one(id)}/models`, { body }),
  updateModel: (id: string, name: string, body: S['ProviderModelUpdate']) =>
    request<ProviderModel>('PATCH', model(id, name), { body }),
  removeModel: (id: string, name: string) => request<void>('DELETE', model(id, name)),
  probe: (id: string, name: string) => request<ProbeOutcome>('POST', `${model(id, name)}/probe`),
  setDefaults: (body: ModelDefaults) => request<ModelDefaults>('PUT', `${base}/defaults`, { body }),
  /** An operator model's limits and capabilities as this tenant's runs see them, and its override. */
  capabilities: (name: string) => request<ModelCapabilities>('GET', capabilities(name)),
  setOverride: (name: string, body: ModelOverride) => request<ModelCapabilities>('PUT', capabilities(name), { body }),
  dropOverride: (name: string) => request<void>('DELETE', capabilities(name)),
};

/** The type a listed model id most likely has (the builder can change it before adding). */
export function guessType(id: string): ModelType {
  const lower = id.toLowerCase();
  if (lower.includes('rerank')) return 'rerank';
  if (/embed|bge-|e5-|gte-|nomic/.test(lower)) return 'embedding';
  return 'chat';
}
